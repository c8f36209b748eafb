"""The names of a run directory's files, and the version of its layout (no imports: any module may read them)."""

from __future__ import annotations

#: The run-directory layout this version of anchor writes. ``config.json`` records it
#: (``RunConfig.schema_version``); a directory written before it was recorded is version 1.
#:
#: 1. config.json, predictions.jsonl, traces.jsonl, calls.jsonl, sample.json, metrics.json,
#:    calibration.json, rejected.jsonl, the artefact folders; metrics.json's costs by stage with
#:    ``request_seconds`` and no ``stage``.
#: 2. config.json records ``schema_version``; metrics.json's costs are ``StageCost`` records
#:    (``stage`` and ``llm_seconds``), as the costs of predictions.jsonl always were.
#: 3. metrics.json, sample.json and calibration.json record ``schema_version`` too (the layout they
#:    were written in), so that each file read on its own says its version (docs/schemas.md).
SCHEMA_VERSION = 3

CONFIG = "config.json"
PREDICTIONS = "predictions.jsonl"
TRACES = "traces.jsonl"
CALLS = "calls.jsonl"
METRICS = "metrics.json"
SAMPLE = "sample.json"
CALIBRATION = "calibration.json"
REJECTED = "rejected.jsonl"
INSTANCES = "instances.jsonl"
"""The instances the run scores, as it read them from its data file (optional: a run written before it was
kept, or killed before it was written, has none, and its readers go back to the data file)."""
LOCK = ".lock"
WORKERS = ".workers"
"""The shards of the workers that write their own records (helper processes, local Ray actors), until the
runner has copied them into the files above (see :mod:`anchor.rundir.shards`)."""
SPACES = "spaces"
"""ANCHOR's factor spaces (one folder per kind of per-scenario artefact; BIRD's are ``bird/``, ...)."""
