"""Shared fixtures: the real MiniLM embedder, scripted LLM clients, and small factor spaces."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402

from anchor.embedding.embed import MiniLMEmbedder  # noqa: E402
from anchor.llm import chain, transport  # noqa: E402
from anchor.llm.client import LLMClient  # noqa: E402
from anchor.llm.ledger import CostLedger  # noqa: E402
from anchor.llm.scripted import Responder, ScriptedBackend  # noqa: E402
from anchor.settings.space import BuildParams  # noqa: E402
from anchor.types import (  # noqa: E402
    Cluster,
    ClusteringStats,
    EmbeddingMatrix,
    Factor,
    FactorLabel,
    FactorSpace,
    LLMIdentity,
    Scenario,
    SpaceEmbeddings,
    StopReason,
)

# Property tests (tests/inference/test_bayes.py, tests/test_metrics.py): no time limit per
# example (Hypothesis's default of 200 ms fails an example for running slowly on a loaded machine, not
# for a wrong answer), and examples drawn from a seed fixed per test, so that every run of the suite
# checks the same ones.
hypothesis_settings.register_profile("anchor", deadline=None, derandomize=True)
hypothesis_settings.load_profile("anchor")

NOODLES = Scenario(
    text="The efficiency of cooking noodles is being compared between hot water and warm water.",
    outcome1="Noodles cook much more efficiently in hot water than they do in warm water.",
    outcome2="Noodles cook much more efficiently in warm water than they do in hot water.",
)


@pytest.fixture
def clean_anchor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ANCHOR_* variable of the environment the tests run in (a test module uses it with
    ``pytestmark = pytest.mark.usefixtures("clean_anchor_env")``)."""
    for name in list(os.environ):
        if name.startswith("ANCHOR_"):
            monkeypatch.delenv(name)


@pytest.fixture(scope="session")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> MiniLMEmbedder:
    """The real all-MiniLM-L6-v2 model (loaded once), with a vector cache in a session tmp dir."""
    emb = MiniLMEmbedder(cache_path=tmp_path_factory.mktemp("minilm") / "vectors.sqlite")
    emb.encode(["warm-up"])  # load the model here, not inside the first test's timing
    return emb


@dataclass
class DelayedScriptedBackend(ScriptedBackend):
    """A scripted backend that yields to the event loop before answering, so concurrent calls
    really interleave (the plain one answers without ever suspending). With ``virtual_seconds``,
    each answer also lengthens the chain of dependent requests by that many seconds (see
    ``stopped_stopwatch``)."""

    delay: float = 0.0
    virtual_seconds: float = 0.0

    async def complete(self, messages, **kwargs):  # noqa: ANN001, ANN003, ANN201
        await asyncio.sleep(self.delay)
        answer = await super().complete(messages, **kwargs)
        if self.virtual_seconds:
            chain.advance(self.virtual_seconds, requests=0)  # the request itself is counted by the transport
        return answer


@pytest.fixture
def stopped_stopwatch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transport measures every request as taking no time, so the seconds of a chain of dependent
    requests are only those a test's backend adds (``virtual_seconds``), not the wall clock's, which a
    loaded machine stretches: which of two chains is the longer no longer depends on the machine."""
    monkeypatch.setattr(transport, "time", SimpleNamespace(perf_counter=lambda: 0.0, time=time.time))


@pytest.fixture
def scripted_client() -> Callable[..., LLMClient]:
    """``scripted_client(responder, delay=0.0, parse_retries=2)``: an LLMClient over a
    ScriptedBackend with its own CostLedger and no cache. ``client.backend.requests`` records
    every request."""

    def make(responder: Responder, *, delay: float = 0.0, parse_retries: int = 2, seed: int = 0,
             virtual_seconds: float = 0.0) -> LLMClient:
        backend = (DelayedScriptedBackend(responder, delay=delay, virtual_seconds=virtual_seconds)
                   if delay or virtual_seconds else ScriptedBackend(responder))
        return LLMClient(backend, cache=None, ledger=CostLedger(), seed=seed, parse_retries=parse_retries)

    return make


@pytest.fixture
def noodles() -> Scenario:
    return NOODLES


def build_space(
    embedder: MiniLMEmbedder,
    clusters: Sequence[tuple[str, Sequence[str]]],
    unclustered: Sequence[str] = (),
    *,
    labels: dict[str, FactorLabel | str] | None = None,
    scenario: Scenario = NOODLES,
) -> FactorSpace:
    """A FactorSpace straight from texts: ``clusters`` is ``[(theme, [factor texts])]``; factors get
    ids f001.. in order (clusters first, then unclustered), labels from ``labels`` (default
    neutral), and MiniLM embeddings for factors and themes."""
    labels = labels or {}
    factors: list[Factor] = []
    built: list[Cluster] = []
    n = 0

    def add(text: str, cluster_id: int | None) -> str:
        nonlocal n
        n += 1
        fid = f"f{n:03d}"
        factors.append(Factor(id=fid, text=text, label=FactorLabel(labels.get(text, FactorLabel.NEUTRAL)),
                              cluster_id=cluster_id, round=1))
        return fid

    for cid, (theme, members) in enumerate(clusters):
        built.append(Cluster(id=cid, theme=theme, factor_ids=[add(t, cid) for t in members]))
    loose = [add(t, None) for t in unclustered]
    embeddings = None
    if factors:
        embeddings = SpaceEmbeddings(
            factor_ids=[f.id for f in factors],
            factors=EmbeddingMatrix.from_array(embedder.model_id, embedder.encode([f.text for f in factors])),
            cluster_ids=[c.id for c in built],
            themes=EmbeddingMatrix.from_array(embedder.model_id, embedder.encode([c.theme for c in built]))
            if built else None,
        )
    return FactorSpace(
        scenario=scenario,
        factors=factors,
        clusters=built,
        unclustered=loose,
        stop_reason=StopReason.TARGET_REACHED,
        params=BuildParams(),
        clustering=ClusteringStats(method="umap+hdbscan" if built else "tiny-fallback", n_factors=len(factors),
                                   n_clusters=len(built), n_unclustered=len(loose)),
        llm=LLMIdentity(backend="scripted", model="scripted-model"),
        embedding_model=embedder.model_id,
        embeddings=embeddings,
    )


@pytest.fixture
def make_space(embedder: MiniLMEmbedder) -> Callable[..., FactorSpace]:
    """``make_space(clusters, unclustered=(), labels=None, scenario=NOODLES)``; see ``build_space``."""

    def make(clusters: Sequence[tuple[str, Sequence[str]]], unclustered: Sequence[str] = (), **kw) -> FactorSpace:
        return build_space(embedder, clusters, unclustered, **kw)

    return make
