"""Saving and loading BIRD models (and transplanted CPTs) as versioned JSON."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from anchor.bird.types import BIRD_MODEL_SCHEMA_VERSION, BirdModel, TransplantModel
from anchor.errors import AnchorError


class BirdModelFileError(AnchorError):
    """A BIRD model file that cannot be used, with the reason."""


Stored = TypeVar("Stored", BirdModel, TransplantModel)


def save_model(model: BirdModel | TransplantModel, path: Path | str) -> Path:
    """Write atomically (temp file + rename). The file gets the permissions the process umask
    allows, like any file the user creates (``mkstemp`` would force 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = model.model_dump_json(indent=2)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_model(path: Path | str) -> BirdModel:
    """A ``BirdModel`` from ``path``; any problem is one ``BirdModelFileError`` line naming the file."""
    return _load(path, BirdModel, "BIRD model")


def load_transplant_model(path: Path | str) -> TransplantModel:
    """A ``TransplantModel`` (BIRD's CPT on an ANCHOR space) from ``path``."""
    return _load(path, TransplantModel, "transplanted BIRD model")


def _load(path: Path | str, cls: type[Stored], what: str) -> Stored:
    path = Path(path)
    if not path.exists():
        raise BirdModelFileError(f"{path}: no such file")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BirdModelFileError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from exc
    except UnicodeDecodeError as exc:
        raise BirdModelFileError(f"{path}: not a UTF-8 text file") from exc
    except OSError as exc:
        raise BirdModelFileError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if not isinstance(raw, dict):
        raise BirdModelFileError(f"{path}: expected a JSON object, found {type(raw).__name__}")
    version = raw.get("schema_version")
    if version != BIRD_MODEL_SCHEMA_VERSION:
        raise BirdModelFileError(f"{path}: {what} schema version {version!r} is not supported (this anchor "
                                 f"reads version {BIRD_MODEL_SCHEMA_VERSION}); build the model again")
    try:
        return cls.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:5])
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise BirdModelFileError(f"{path}: not a valid {what}: {problems}{more}") from exc
