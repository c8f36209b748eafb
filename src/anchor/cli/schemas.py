"""The schema version of what a command prints with ``--json``, in one table.

Some commands print a document that has a version of its own (``anchor build --json`` prints the
factor space file, ``anchor eval --json`` its ``metrics.json``, ``anchor cost --json`` the cost
comparison): it carries that one. The others print an object made for the command, versioned here.

docs/schemas.md lists every output and file with its version and keys; tests/cli/test_schemas.py
runs each command and checks that what it prints carries the version documented there. The rule:
a key may be added without a new version; a key renamed, removed or given another meaning keeps the
old key beside the new one for one version (marked deprecated in docs/schemas.md), or the version
goes up.
"""

from __future__ import annotations

from anchor.serve.errors import API_SCHEMA_VERSION

#: A command's own ``--json`` object -> its schema version.
JSON_OUTPUTS: dict[str, int] = {
    "infer": 1,
    "demo": 1,
    "explain": 1,
    "predict": 1,
    "predict --check": 1,
    "reproduce": 1,
    "reproduce --plan": 1,
    "llm ping": 1,
    "warm-up": 1,
}


#: The JSON bodies of ``anchor serve`` (and the files of its state folder) -> their schema version. Every
#: body the service sends carries the one version of its API; ``GET /v1/spaces/{id}`` sends a space file,
#: whose version is the space file's.
SERVICE_BODIES: dict[str, int] = dict.fromkeys((
    "POST /v1/predictions", "POST /v1/predictions (cases)", "GET /v1/spaces", "GET /v1/jobs/{id}", "GET /v1/jobs",
    "GET /v1/methods", "GET /healthz", "any error", "STATE/jobs/ID/job.json", "STATE/answers/ID.json"),
    API_SCHEMA_VERSION)


def json_schema_version(output: str) -> int:
    """The schema version of the command output ``output`` (a key of :data:`JSON_OUTPUTS`)."""
    return JSON_OUTPUTS[output]
