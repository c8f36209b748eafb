"""Saving and loading factor spaces as versioned JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from anchor.errors import AnchorError
from anchor.files import write_atomic
from anchor.settings.space import BuildParams
from anchor.types import FACTOR_SPACE_SCHEMA_VERSION, FactorSpace

#: What of an embedder's identity a stored space depends on.
EMBEDDER_FIELDS = ("model", "dimension", "where")


class SpaceFileError(AnchorError):
    """A factor-space file that cannot be used, with the reason."""


def space_settings(params: BuildParams, model: str, embedder: dict[str, Any] | None) -> dict[str, Any]:
    """Everything a factor space depends on besides its scenario: the stage-1 settings (seed
    included), the LLM that built it and the embedder of its vectors. Spaces in a store shared by
    runs are named by these (``anchor.artefacts.content_key``)."""
    return {"build": params.model_dump(mode="json"), "model": model,
            "embedder": {k: (embedder or {}).get(k) for k in EMBEDDER_FIELDS}}


def save_space(space: FactorSpace, path: Path | str) -> Path:
    """Write atomically (temp file + rename) so a crash never leaves half a file behind."""
    return write_atomic(path, space.model_dump_json(indent=2))


def load_space(path: Path | str) -> FactorSpace:
    path = Path(path)
    if not path.exists():
        raise SpaceFileError(f"{path}: no such file (build one with `anchor build ... --out {path}`)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SpaceFileError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise SpaceFileError(f"{path}: not a UTF-8 text file") from exc
    except OSError as exc:  # a directory, no permission, ...
        raise SpaceFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not isinstance(raw, dict):
        raise SpaceFileError(f"{path}: expected a JSON object, found {type(raw).__name__}")
    version = raw.get("schema_version")
    if version != FACTOR_SPACE_SCHEMA_VERSION:
        raise SpaceFileError(
            f"{path}: factor-space schema version {version!r} is not supported "
            f"(this anchor reads version {FACTOR_SPACE_SCHEMA_VERSION}); rebuild it with `anchor build`"
        )
    try:
        space = FactorSpace.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:5]
        )
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise SpaceFileError(f"{path}: not a valid factor space: {problems}{more}") from exc
    problem = _embeddings_problem(space)
    if problem:
        raise SpaceFileError(f"{path}: not a valid factor space: {problem}")
    return space


def _embeddings_problem(space: FactorSpace) -> str | None:
    """Why the stored vectors cannot be used (checked at load time rather than failing obscurely at
    mapping time), or None."""
    emb = space.embeddings
    if emb is None:
        return None
    known = {f.id for f in space.factors}
    unknown = [fid for fid in emb.factor_ids if fid not in known]
    if unknown:
        return f"embeddings reference unknown factors: {unknown[:5]}"
    for what, matrix, ids, owner in (("factor", emb.factors, emb.factor_ids, "factor"),
                                     ("theme", emb.themes, emb.cluster_ids, "cluster")):
        if matrix is None:
            continue
        try:
            rows = matrix.to_array().shape[0]
        except ValueError as exc:  # bad base64 (binascii.Error) or a payload of the wrong size
            return f"{what} embeddings cannot be decoded: {exc}"
        if rows != len(ids):
            return f"embeddings hold {rows} {what} vector(s) for {len(ids)} {owner} id(s)"
    return None
