"""Run identity: which settings of a run directory's ``config.json`` must match for a rerun to resume it,
and what a run records of its LLM's settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from anchor.cases.model import CaseLimits
from anchor.config import AnchorConfig
from anchor.embedding.embed import KNOWN_DIMENSIONS, MiniLMEmbedder
from anchor.embedding.server import DEFAULT_SERVER_MODEL
from anchor.llm.settings import LLMSettings
from anchor.methods.registry import METHODS
from anchor.rundir import RunDirectory
from anchor.rundir.records import RunConfig
from anchor.runs.errors import RunError
from anchor.settings.space import with_legacy_build

#: RunConfig fields that do not define a run: a rerun may change them and still resume.
NOT_IDENTITY = {"command", "data_path", "anchor_version", "schema_version"}
#: Of the LLM description, only these define a run (not where the server listens or how the key arrives).
LLM_IDENTITY = ("backend", "model", "seed", "context_tokens")
#: Of the calibrator applied (anchor eval --calibrator), these define a run.
CALIBRATOR_IDENTITY = ("kind", "sha256")
#: Of the embedder (methods that embed), all of it: vectors of two embedders are not comparable.
EMBEDDER_IDENTITY = ("model", "dimension", "where")


def recorded_llm(settings: LLMSettings) -> dict[str, Any]:
    """What a run records of an LLM's settings (``RunConfig.llm``, ``.estimator``): no secret."""
    described = settings.describe()
    described.pop("api_key", None)
    return described


def run_identity(config: dict[str, Any]) -> dict[str, Any]:
    """The parts of a run configuration that must match to resume it.

    The configuration is read through ``RunConfig``, ``AnchorConfig`` and ``CaseLimits`` first, so that a
    setting added after a run was written counts as its default there (an older run directory stays
    resumable as long as the new setting is left at its default). The abduction window is the
    exception: a run written before it existed built its spaces one round at a time, and reads so.
    The embedder of a run written before it was recorded is read from the LLM description.
    """
    config = _with_defaults(config)
    out = {k: v for k, v in config.items() if k not in NOT_IDENTITY}
    out["embedder"] = _embedder(config)
    llm = out.get("llm") or {}
    out["llm"] = {k: llm.get(k) for k in LLM_IDENTITY}
    if out.get("estimator"):
        out["estimator"] = {k: out["estimator"].get(k) for k in LLM_IDENTITY}
    if out.get("calibrator"):
        # The calibrator's content defines the run, not where its file lies.
        out["calibrator"] = {k: out["calibrator"].get(k) for k in CALIBRATOR_IDENTITY}
    return out


def _embedder(config: dict[str, Any]) -> dict[str, Any] | None:
    """The embedder's identity (``RunConfig.embedder``), or, for a run written before it was recorded,
    what ``llm.embeddings`` says of it (the width of a server's vectors then unknown)."""
    if isinstance(config.get("embedder"), dict):
        return {k: config["embedder"].get(k) for k in EMBEDDER_IDENTITY}
    spec = METHODS.get(str(config.get("method")))
    if spec is None or not spec.uses_anchor_config:
        return None
    described = (config.get("llm") or {}).get("embeddings")
    if isinstance(described, dict):
        model = described.get("model") or DEFAULT_SERVER_MODEL
        where = str(described.get("base_url") or "").rstrip("/")
        return {"model": model, "dimension": KNOWN_DIMENSIONS.get(model), "where": where}
    return {"model": MiniLMEmbedder.model_id, "dimension": MiniLMEmbedder.dimension, "where": MiniLMEmbedder.where}


def _unknown_widths_alike(old: dict[str, Any], new: dict[str, Any]) -> None:
    """A width not known on one side (an older run's server embedder, or one not asked yet) is not a difference."""
    a, b = old.get("embedder"), new.get("embedder")
    if isinstance(a, dict) and isinstance(b, dict) and (a.get("dimension") is None or b.get("dimension") is None):
        a["dimension"] = b["dimension"] = None


def _with_defaults(config: dict[str, Any]) -> dict[str, Any]:
    try:
        filled = RunConfig.model_validate(config).model_dump(mode="json")
        anchor = filled.get("anchor_config")
        if isinstance(anchor, dict):
            anchor = {**anchor, "build": with_legacy_build(anchor["build"])} if "build" in anchor else anchor
            filled["anchor_config"] = AnchorConfig.model_validate(anchor).model_dump(mode="json")
        cases = filled.get("cases")
        if isinstance(cases, dict) and isinstance(cases.get("limits"), dict):  # anchor predict's limits, as above
            filled["cases"] = {**cases, "limits": CaseLimits.model_validate(cases["limits"]).model_dump(mode="json")}
    except ValidationError:
        return config  # compared as written; the difference is reported field by field
    return filled


def first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any] | None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            found = first_difference(old.get(key, "<absent>"), new.get(key, "<absent>"),
                                      f"{path}.{key}" if path else str(key))
            if found:
                return found
        return None
    return None if old == new else (path, old, new)


def identity_difference(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> tuple[str, Any, Any] | None:
    """The first setting in which the stored configuration ``old`` of the run in ``run_dir`` differs from
    ``new`` (None: the same run). The run whose artefacts it reuses counts as the same when both lead to the
    same directory, however they write it: runs of a reproduction record it from their own directory now,
    from the working directory before."""
    a, b = run_identity(old), run_identity(new)
    _unknown_widths_alike(a, b)
    if _same_directory(old, new, run_dir):
        for key in ("spaces_from", "spaces_from_base"):
            a[key] = b.get(key)
    return first_difference(a, b)


def _same_directory(old: dict[str, Any], new: dict[str, Any], run_dir: Path) -> bool:
    try:
        found = [RunConfig.model_validate(c).spaces_source(run_dir) for c in (old, new)]
    except ValidationError:
        return False
    return found[0] is not None and found[1] is not None and found[0].resolve() == found[1].resolve()


def check_resumable(out_dir: Path, new: dict[str, Any]) -> None:
    """Raise :class:`RunError` unless the run directory ``out_dir`` holds no run yet or a run with the
    identity of ``new``, so that the run there can go on (a directory of a newer layout is refused too)."""
    old = RunDirectory(out_dir, error=RunError).read_config_data()
    if old is None:
        return
    diff = identity_difference(old, new, out_dir)
    if diff is not None:
        field, was, now = diff
        raise RunError(f"{out_dir} holds a run with other settings: {field} was {was!r}, now {now!r}; "
                        "use another --out, or the same settings to resume it")
