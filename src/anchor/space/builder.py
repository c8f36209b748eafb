"""Stage 1 end to end: abduction, voting (overlapping abduction), embeddings, clustering, themes and
pruning.

``FactorSpaceBuilder`` is configured once (client, embedder, parameters, and optionally a custom
reducer and clusterer, BERTopic-style) and builds a ``FactorSpace`` per scenario.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from anchor.compute import offload
from anchor.embedding.embed import Embedder, MiniLMEmbedder
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.llm.ledger import summarize
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.settings.space import BuildParams
from anchor.space import structure
from anchor.space.abduction import AbductionOutcome, Abductor
from anchor.space.structure import Clusterer, Reducer, cluster_embeddings
from anchor.space.themes import name_and_prune
from anchor.space.vote_stream import VoteStream
from anchor.types import (
    Cluster,
    ClusteringStats,
    CriticalPath,
    EmbeddingMatrix,
    Factor,
    FactorSpace,
    Scenario,
    SpaceEmbeddings,
)

FLAT_THEME = "all factors"


@dataclass
class _Organised:
    factors: list[Factor]
    clusters: list[Cluster]
    unclustered: list[str]
    clustering: ClusteringStats
    vectors: np.ndarray
    theme_vectors: np.ndarray | None
    compute: dict[str, float]


class FactorSpaceBuilder:
    def __init__(
        self,
        client: LLMClient,
        embedder: Embedder | None = None,
        params: BuildParams | None = None,
        *,
        reducer: Reducer | None = None,
        clusterer: Clusterer | None = None,
    ) -> None:
        self.client = client
        self.embedder = embedder if embedder is not None else MiniLMEmbedder()
        self.params = params if params is not None else BuildParams()
        self.reducer = reducer
        self.clusterer = clusterer

    async def build(self, scenario: Scenario, report: Reporter = silent) -> FactorSpace:
        p = self.params
        started = time.perf_counter()
        # Slow first-use costs (loading MiniLM, compiling UMAP) are paid on worker threads while
        # the first abduction rounds wait for the LLM, not later in the middle of traffic.
        offload.warm_up(self.embedder, clustering=structure.warm_up if p.cluster and self.reducer is None else None)
        before = chain.current()
        with self.client.ledger.scope() as records:
            votes = VoteStream(self.client, scenario, p, report)
            abduced: AbductionOutcome | None = None
            try:
                abduced = await Abductor(self.client, self.embedder, p).run(scenario, report, on_merge=votes.add)
                organised = await self._organise(scenario, abduced, votes, report)
                # Rounds started before the stop ran beside the rest of the build; they are
                # waited for last (their requests belong to this build's cost).
                beyond_stop = await abduced.beyond_stop.collect()
            finally:  # a failed build leaves nothing running
                await votes.cancel()
                if abduced is not None:
                    await abduced.beyond_stop.cancel()
        compute = organised.compute
        factors, clusters = organised.factors, organised.clusters

        model_id = getattr(self.embedder, "model_id", type(self.embedder).__name__)
        embeddings = None
        if factors:
            embeddings = SpaceEmbeddings(
                factor_ids=[f.id for f in factors],
                factors=EmbeddingMatrix.from_array(model_id, organised.vectors),
                cluster_ids=[c.id for c in clusters],
                themes=(EmbeddingMatrix.from_array(model_id, organised.theme_vectors)
                        if organised.theme_vectors is not None else None),
            )
        compute["total_wall"] = round(time.perf_counter() - started, 4)
        return FactorSpace(
            scenario=scenario,
            factors=factors,
            clusters=clusters,
            unclustered=organised.unclustered,
            stop_reason=abduced.stop_reason,
            rounds=abduced.rounds,
            rounds_beyond_stop=beyond_stop,
            params=p,
            clustering=organised.clustering,
            cost=summarize(records),
            critical_path=CriticalPath(**chain.since(before)._asdict()),
            compute_seconds=compute,
            llm=self.client.identity,
            embedding_model=model_id,
            embeddings=embeddings,
        )

    async def _organise(self, scenario: Scenario, abduced: AbductionOutcome, voting: VoteStream,
                        report: Reporter) -> _Organised:
        """Label the abduced factors by vote (most votes were asked for while abduction went on),
        cluster them, name the themes and prune."""
        p = self.params
        compute: dict[str, float] = {}
        texts = abduced.factors

        votes = await voting.finish(texts)
        factors = [
            Factor(id=f"f{i + 1:03d}", text=text, label=v.majority(), votes=v, round=r)
            for i, (text, v, r) in enumerate(zip(texts, votes, abduced.found_in_round, strict=True))
        ]

        t0 = time.perf_counter()
        vectors = abduced.vectors if len(texts) else self.embedder.encode([])
        compute["embedding"] = round(time.perf_counter() - t0, 4)

        report(ProgressEvent("clustering", 0, 1, f"{len(factors)} factors"))
        # The clustering process takes the default parts; a caller's own reducer or clusterer stays here.
        timed = await offload.cluster(cluster_embeddings, np.asarray(vectors), enabled=p.cluster,
                                      reducer=self.reducer, clusterer=self.clusterer, seed=p.seed,
                                      local=self.reducer is not None or self.clusterer is not None)
        result = timed.result
        compute["clustering"] = round(timed.seconds, 4)
        report(ProgressEvent("clustering", 1, 1, f"{result.stats.n_clusters} clusters"))

        groups: dict[int, list[Factor]] = {}
        unclustered: list[str] = []
        for factor, label in zip(factors, result.labels.tolist(), strict=True):
            if label < 0:
                unclustered.append(factor.id)
            else:
                groups.setdefault(int(label), []).append(factor)

        if p.cluster and result.stats.method != "flat":
            clusters = await name_and_prune(self.client, scenario, groups, prune=p.prune, report=report)
        else:
            clusters = [Cluster(id=cid, theme=FLAT_THEME, factor_ids=[f.id for f in members])
                        for cid, members in sorted(groups.items())]
        placed = {fid: c.id for c in clusters for fid in c.factor_ids}
        for factor in factors:
            factor.cluster_id = placed.get(factor.id)

        t0 = time.perf_counter()
        theme_vectors = await offload.encode(self.embedder, [c.theme for c in clusters]) if clusters else None
        compute["embedding"] = round(compute["embedding"] + time.perf_counter() - t0, 4)
        return _Organised(factors, clusters, unclustered, result.stats, vectors, theme_vectors, compute)
