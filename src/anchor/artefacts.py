"""Per-scenario artefacts (ANCHOR's factor spaces, BIRD's models) shared through an ``ArtefactStore``.

An artefact lives in a folder (a run directory's, or a store shared by runs): built once (one
build per key at a time), saved atomically, loaded back on resume, never saved when the build failed
(so a rerun tries again). Only the most recently used artefacts stay in memory; the others are read
back from their files when asked for again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from anchor.errors import AnchorError, LLMOutputError, RequestRejected, RetryBudgetExhausted
from anchor.llm import chain
from anchor.llm.ledger import detached_context
from anchor.secrets import scrub
from anchor.types import Scenario, scenario_key

#: Errors that fail one instance (it is recorded as failed and retried on resume) rather than the run.
INSTANCE_FAILURES: tuple[type[BaseException], ...] = (LLMOutputError, RetryBudgetExhausted, RequestRejected)


def content_key(scenario: Scenario, settings: dict[str, Any]) -> str:
    """The name of an artefact in a store that runs with different settings share: the scenario's key
    and a digest of the settings that built it (JSON, keys sorted), so that an artefact is found
    again by any run that would build the same one, and never by a run that would build another."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                            .encode("utf-8")).hexdigest()[:12]
    return f"{scenario_key(scenario)}-{digest}"


class ArtefactFailed(AnchorError):
    """A per-scenario artefact could not be built; every instance of the scenario fails with this."""


class ReuseMismatch(AnchorError):
    """An artefact offered for reuse was made with other settings: the whole run stops."""


M = TypeVar("M", bound=BaseModel)


class ArtefactStore(Generic[M]):
    """Per-scenario artefacts in ``folder`` (``<key>.json``), built once and shared.

    ``reuse_from`` is another folder to look in before building (artefacts of an earlier run
    directory); what was taken from there is listed in ``reused`` so its cost is not claimed as
    this run's. Builds run in a detached context: their LLM calls are charged to the artefact, not
    to whichever prediction happened to need it first. A build continues the chain of dependent
    requests (``llm.chain``) of the caller that started it (what it waited for before, such as the
    factor space a transplant is trained on), and every caller continues from the build's chain.

    ``uses(item)`` names the artefacts of other stores an artefact was built on (``{kind: key}``,
    e.g. the factor space under a BIRD-on-ANCHOR model), so that the cost of a reused one is found
    through the artefact a prediction names.

    ``publish=True`` also saves what is built into ``reuse_from`` (a store shared by several runs),
    so later runs find it there. ``max_in_memory`` bounds how many artefacts are held at once (a
    run over thousands of scenarios would otherwise keep every space).
    """

    def __init__(self, folder: Path, *, load: Callable[[Path], M], save: Callable[[M, Path], Any],
                 reuse_from: Path | None = None, uses: Callable[[M], dict[str, str]] | None = None,
                 publish: bool = False, max_in_memory: int = 256) -> None:
        self.folder = folder
        self._load = load
        self._save = save
        self.reuse_from = reuse_from
        self.uses = uses
        self.publish = publish and reuse_from is not None and Path(reuse_from).resolve() != Path(folder).resolve()
        self.max_in_memory = max(1, max_in_memory)
        self._memory: OrderedDict[str, M] = OrderedDict()
        self._errors: dict[str, str] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.reused: dict[str, Path] = {}
        self.built: list[str] = []
        self._chains: dict[str, chain.Chain] = {}

    # The layout of a folder of artefacts, ``<root>/<kind>/<key>.json``, is spelled here and nowhere else:
    # a reader that looks for an artefact file (the service, a run's index page) asks these.

    @staticmethod
    def kind_folder(root: Path | str, kind: str) -> Path:
        """The folder where ``root`` (a run directory, or a store shared by runs) keeps one kind of artefact
        (``spaces``, ``bird``)."""
        return Path(root) / kind

    @staticmethod
    def file(folder: Path | str, key: str) -> Path:
        """The file of artefact ``key`` in a store's ``folder``."""
        return Path(folder) / f"{key}.json"

    @classmethod
    def stored_file(cls, root: Path | str, kind: str, key: str) -> Path:
        """The file of artefact ``key`` of ``kind`` under ``root``."""
        return cls.file(cls.kind_folder(root, kind), key)

    def path(self, key: str) -> Path:
        return self.file(self.folder, key)

    def load_file(self, path: Path) -> M:
        """Read one artefact file (errors propagate)."""
        return self._load(path)

    def _try_load(self, path: Path) -> M | None:
        if not path.exists():
            return None
        try:
            return self._load(path)
        except (AnchorError, ValueError, OSError):
            return None  # damaged: rebuilt (its LLM answers come from the cache)

    async def get(self, key: str, build: Callable[[], Awaitable[M]],
                  mismatch: Callable[[M], str | None] | None = None) -> M:
        """The artefact ``key``: from memory, this run's folder, the reuse folder, or built now.

        ``mismatch(item)`` says why a reused artefact does not fit this run (None when it does).
        """
        item = await self._get(key, build, mismatch)
        chain.merge(self._chains.get(key, chain.Chain()))
        return item

    def _remember(self, key: str, item: M) -> None:
        self._memory[key] = item
        self._memory.move_to_end(key)
        while len(self._memory) > self.max_in_memory:
            self._memory.popitem(last=False)

    async def _get(self, key: str, build: Callable[[], Awaitable[M]],
                   mismatch: Callable[[M], str | None] | None) -> M:
        if key in self._memory:
            self._memory.move_to_end(key)
            return self._memory[key]
        if key in self._errors:
            raise ArtefactFailed(self._errors[key])
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key]
            if key in self._errors:
                raise ArtefactFailed(self._errors[key])
            item = self._try_load(self.path(key))
            if item is None and self.reuse_from is not None:
                other = self.reuse_from / f"{key}.json"
                item = self._try_load(other)
                if item is not None:
                    problem = mismatch(item) if mismatch is not None else None
                    if problem:
                        raise ReuseMismatch(f"{other}: cannot reuse it here: {problem}")
                    self.reused[key] = other
            if item is None:
                task = asyncio.get_running_loop().create_task(chain.traced(build()), context=detached_context())
                try:
                    item, self._chains[key] = await task
                except INSTANCE_FAILURES as exc:
                    self._errors[key] = f"could not build the per-scenario artefact: {scrub(str(exc))}"
                    raise ArtefactFailed(self._errors[key]) from exc
                self._save(item, self.path(key))
                if self.publish:
                    assert self.reuse_from is not None
                    self.reuse_from.mkdir(parents=True, exist_ok=True)
                    self._save(item, self.reuse_from / f"{key}.json")
                self.built.append(key)
            self._remember(key, item)
            return item


def reused_artefacts(stores: dict[str, ArtefactStore[Any]], keys: Iterable[str]) -> list[tuple[str, Any]]:
    """(key, artefact) of each artefact named in ``keys``, or built on one of them (``ArtefactStore.uses``),
    that a store took from its reuse folder: found there and not in its own folder (the artefact is
    None when that file cannot be read)."""
    wanted = [(kind, key) for kind in stores for key in sorted(set(keys))]
    seen: set[tuple[str, str]] = set()
    found: list[tuple[str, Any]] = []
    while wanted:
        kind, key = wanted.pop(0)
        store = stores.get(kind)
        if store is None or store.reuse_from is None or (kind, key) in seen:
            continue
        seen.add((kind, key))
        own, other = store.path(key), store.reuse_from / f"{key}.json"
        reused = not own.exists() and other.exists()
        if not reused and not (store.uses is not None and own.exists()):
            continue
        try:
            item = store.load_file(other if reused else own)
        except (AnchorError, ValueError, OSError):
            item = None
        if reused:
            found.append((key, item))
        if item is None:
            continue
        if store.uses is not None:
            wanted.extend(store.uses(item).items())
    return found
