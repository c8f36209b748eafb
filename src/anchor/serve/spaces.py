"""The space store, as the service shows it: the factor spaces of ``STORE/spaces/`` (the store ``anchor
predict --spaces STORE`` reads and adds to), and builds started by ``POST /v1/spaces``.

A space is named by its content key (the scenario's key and a digest of what built it), so the store
can hold spaces of other settings than the service's; the service builds and answers with its own.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from anchor.audit.pages import space_html
from anchor.cases import CaseLimits
from anchor.serve.engine import OnlineEngine, space_file, store_spaces
from anchor.serve.errors import API_SCHEMA_VERSION, ApiError
from anchor.serve.models import SpaceRequest
from anchor.serve.settings import valid_id
from anchor.serve.state import now_iso
from anchor.space.io import load_space
from anchor.text import normalise_space, same_text
from anchor.types import Scenario

#: The big parts of a space file that a summary leaves out (the vectors, and every abduction round).
BULKY = ("embeddings", "rounds", "rounds_beyond_stop")
#: The method whose artefact a space is.
SPACE_METHOD = "anchor"


class Spaces:
    def __init__(self, store: Path, engine: OnlineEngine) -> None:
        self.folder = store_spaces(store)
        self.engine = engine
        self.building: dict[str, tuple[Scenario, str, asyncio.Task[None]]] = {}
        self.errors: dict[str, str] = {}
        self._summaries: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}

    def path(self, space_id: str) -> Path:
        if not valid_id(space_id):
            raise ApiError(422, f"{space_id[:60]!r} is not a space id (letters, digits, '.', '_', '-')", field="id")
        return space_file(self.folder, space_id)

    # ------------------------------------------------------------------ reading

    def summary(self, path: Path) -> dict[str, Any] | None:
        """What the listing shows of one space file (read once per version of the file)."""
        try:
            stat = path.stat()
        except OSError:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._summaries.get(path.stem)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or "scenario" not in data:
            return None
        summary = {"id": path.stem, "scenario": data.get("scenario"), "n_factors": len(data.get("factors") or []),
                   "n_clusters": len(data.get("clusters") or []), "stop_reason": data.get("stop_reason"),
                   "model": (data.get("llm") or {}).get("model"), "embedding_model": data.get("embedding_model"),
                   "bytes": stat.st_size, "links": {"self": f"/v1/spaces/{path.stem}",
                                                     "page": f"/v1/spaces/{path.stem}/page"}}
        self._summaries[path.stem] = (stamp, summary)
        return summary

    def listing(self, limit: int, offset: int) -> dict[str, Any]:
        files = sorted(self.folder.glob("*.json"), key=lambda p: p.stem) if self.folder.is_dir() else []
        files = [p for p in files if valid_id(p.stem)]
        shown = [s for p in files[offset:offset + limit] if (s := self.summary(p)) is not None]
        building = [{"id": key, "scenario": scenario.model_dump(), "started": started}
                    for key, (scenario, started, _) in list(self.building.items())]  # read from a thread
        return {"schema_version": API_SCHEMA_VERSION, "total": len(files), "offset": offset, "spaces": shown,
                "building": building}

    def read(self, space_id: str) -> dict[str, Any] | None:
        """The space file without its bulky parts, with its id and links; its version is the space file's."""
        path = self.path(space_id)
        try:
            data = json.loads(path.read_bytes())
        except OSError:
            return None
        except ValueError:
            raise ApiError(409, f"space {space_id}: the stored file cannot be read (damaged)", field="id") from None
        for key in BULKY:
            data.pop(key, None)
        data.setdefault("schema_version", 1)
        return {**data, "id": space_id, "state": "stored",
                "links": {"self": f"/v1/spaces/{space_id}", "page": f"/v1/spaces/{space_id}/page"}}

    def page(self, space_id: str) -> str | None:
        path = self.path(space_id)
        if not path.exists():
            return None
        space = load_space(path)
        return space_html(space, title=f"Factor space {space_id}")

    def pending(self, space_id: str) -> dict[str, Any] | None:
        if space_id in self.building:
            scenario, started, _ = self.building[space_id]
            return {"schema_version": API_SCHEMA_VERSION, "id": space_id, "state": "building",
                    "scenario": scenario.model_dump(), "started": started,
                    "links": {"self": f"/v1/spaces/{space_id}"}}
        if space_id in self.errors:
            return {"schema_version": API_SCHEMA_VERSION, "id": space_id, "state": "failed",
                    "error": self.errors[space_id], "links": {"self": f"/v1/spaces/{space_id}"}}
        return None

    # ------------------------------------------------------------------ building

    async def build(self, request: SpaceRequest, wait: float) -> tuple[str, bool]:
        """Start building the request's scenario's space (unless stored or under way); its id and whether it is
        stored by the time ``wait`` runs out."""
        limits = CaseLimits()
        texts = {}
        for name in ("scenario", "outcome1", "outcome2"):
            text = normalise_space(getattr(request, name))
            if name != "scenario" and not text:
                raise ApiError(422, f"{name} is empty", field=name)
            if len(text) > limits.max_scenario_chars:
                raise ApiError(422, f"{name} has {len(text):,} characters, over the limit of "
                                    f"{limits.max_scenario_chars:,}", field=name)
            texts[name] = text
        if same_text(texts["outcome1"], texts["outcome2"]):
            raise ApiError(422, "outcome1 and outcome2 are the same text", field="outcome2")
        scenario = Scenario(text=texts["scenario"], outcome1=texts["outcome1"], outcome2=texts["outcome2"])
        worker = await self.engine.worker(SPACE_METHOD, None, None)
        key = self.engine.artefact_key(worker, scenario)
        assert key is not None
        if self.path(key).exists():
            return key, True
        if key not in self.building:
            self.errors.pop(key, None)
            task = asyncio.get_running_loop().create_task(self._build(worker, key, scenario))
            self.building[key] = (scenario, now_iso(), task)
        task = self.building[key][2]
        if wait > 0:
            await asyncio.wait([task], timeout=wait)
        return key, self.path(key).exists()

    async def _build(self, worker: Any, key: str, scenario: Scenario) -> None:
        try:
            await self.engine.prepare(worker, scenario)
        except Exception as exc:  # noqa: BLE001 - a failed build is reported on the space, not the service
            from anchor.secrets import scrub

            self.errors[key] = scrub(str(exc))[:800] or type(exc).__name__
        finally:
            self.building.pop(key, None)

    async def close(self) -> None:
        tasks = [task for _, _, task in self.building.values()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
