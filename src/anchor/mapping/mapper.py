"""Stage 2: map a condition onto the factor space.

Retrieval (hierarchical coarse-to-fine, or flat for the ablation, through the retriever chosen at
construction: exact KNN by default, FAISS or BM25) proposes candidates; ``R``
independent LLM selections vote on them and those with at least ``ceil(vote_ratio * R)`` votes
pass; a lenient reflection pass then drops factors with no clear link to the condition. Answers
naming anything that is not a candidate are discarded and counted in the trace.
"""

from __future__ import annotations

import time

import numpy as np

from anchor import prompts
from anchor.compute import offload
from anchor.embedding.embed import Embedder
from anchor.errors import ConfigurationError
from anchor.llm.client import LLMClient
from anchor.llm.context import fit_prompt, merge_truncations
from anchor.mapping.retrieval import CandidateIndex, FlatIndex, HierarchicalIndex
from anchor.mapping.retrievers import KNNRetriever, Retriever
from anchor.settings.mapping import MappingConfig
from anchor.types import FactorSpace, MappingTrace


def check_embedder(space: FactorSpace, embedder: Embedder) -> None:
    """Refuse to search ``space`` with vectors of another embedder than the one that made its vectors
    and clusters (embedders are told apart by model name: see ``anchor.embedding.server``), or of another
    width than its stored vectors (known without a request: a server serving another model under the name)."""
    mine = getattr(embedder, "model_id", type(embedder).__name__)
    if space.embedding_model != mine:
        raise ConfigurationError(
            f"the factor space was embedded with {space.embedding_model!r} but this run embeds with {mine!r}; "
            "vectors of two embedders are not comparable: use the space's embedder (--embed-base-url, "
            "--embed-model) or rebuild the space")
    width = getattr(embedder, "known_dimension", None)
    stored = space.embeddings.factors.dim if space.embeddings is not None else None
    if width is not None and stored is not None and width != stored:
        raise ConfigurationError(
            f"the factor space holds {stored}-dimensional vectors of {space.embedding_model!r} but this run's "
            f"embedder ({getattr(embedder, 'where', type(embedder).__name__)}) makes {width}-dimensional ones under "
            "that name; vectors of two embedders are not comparable: use the space's embedder or rebuild the space")


def space_vectors(space: FactorSpace, embedder: Embedder) -> tuple[dict[str, np.ndarray], dict[int, np.ndarray]]:
    """Factor and theme vectors: stored ones when the space carries them, else computed now (by the
    space's embedder only: another one is refused)."""
    check_embedder(space, embedder)
    stored = space.embeddings
    if stored is not None and stored.factors.model == space.embedding_model:
        fmat = stored.factors.to_array()
        factor_vecs = dict(zip(stored.factor_ids, fmat, strict=True))
        theme_vecs: dict[int, np.ndarray] = {}
        if stored.themes is not None:
            theme_vecs = dict(zip(stored.cluster_ids, stored.themes.to_array(), strict=True))
        if all(c.id in theme_vecs for c in space.clusters) and all(f.id in factor_vecs for f in space.factors):
            return factor_vecs, theme_vecs
    texts = [f.text for f in space.factors]
    fmat = embedder.encode(texts) if texts else np.zeros((0, 384), dtype=np.float32)
    tmat = embedder.encode([c.theme for c in space.clusters]) if space.clusters else None
    factor_vecs = {f.id: v for f, v in zip(space.factors, fmat, strict=True)}
    theme_vecs = {c.id: v for c, v in zip(space.clusters, tmat, strict=True)} if tmat is not None else {}
    return factor_vecs, theme_vecs


class ConditionMapper:
    """Built once per factor space; ``map`` runs per condition. ``retriever`` is the candidate-search
    backend (exact KNN when None); K1/K2, the metric and hierarchical-or-flat come from ``config``."""

    def __init__(self, client: LLMClient, embedder: Embedder, space: FactorSpace,
                 config: MappingConfig | None = None, *, retriever: Retriever | None = None) -> None:
        check_embedder(space, embedder)
        self.client = client
        self.embedder = embedder
        self.space = space
        self.config = config or MappingConfig()
        self.retriever: Retriever = retriever if retriever is not None else KNNRetriever()
        self._index: CandidateIndex | None = None
        self.index_seconds = 0.0

    @property
    def index(self) -> CandidateIndex:
        if self._index is None:
            t0 = time.perf_counter()
            factor_vecs, theme_vecs = space_vectors(self.space, self.embedder)
            c = self.config
            if c.hierarchical:
                self._index = HierarchicalIndex(self.space, factor_vecs, theme_vecs, alpha=c.alpha, k1=c.k1,
                                                k2=c.k2, metric=c.metric,  # type: ignore[arg-type]
                                                retriever=self.retriever)
            else:
                self._index = FlatIndex(self.space, factor_vecs, k=c.k1 * c.k2 + c.k2,
                                        metric=c.metric, retriever=self.retriever)  # type: ignore[arg-type]
            self.index_seconds = time.perf_counter() - t0
        return self._index

    async def map(self, condition: str, timings: dict[str, float] | None = None) -> MappingTrace:
        c = self.config
        t0 = time.perf_counter()
        # A long condition is embedded whole (chunk mean), not cut at the model's input limit.
        vector, embedding = await offload.encode_condition(self.embedder, condition)
        check_embedder(self.space, self.embedder)  # again: a server's width may only be known now that it answered
        t1 = time.perf_counter()
        clusters, candidates = self.index.query(vector, text=condition)
        t2 = time.perf_counter()
        if timings is not None:
            timings["embed_condition"] = round(t1 - t0, 6)
            timings["retrieval"] = round(t2 - t1, 6)
        trace = MappingTrace(condition=condition, retrieval="hierarchical" if c.hierarchical else "flat",
                             condition_embedding=embedding, retriever=self.retriever.name, clusters=clusters,
                             candidates=candidates, vote_threshold=c.vote_threshold)
        if not candidates:
            return trace

        by_text = {cand.text: cand.factor_id for cand in candidates}
        texts = tuple(cand.text for cand in candidates)
        schema = prompts.choice_list_schema("Selection", "selected", texts)
        # The same (possibly shortened) condition serves all R selection rounds.
        fitted = fit_prompt(self.client.backend, prompts.SELECT_FACTORS, scenario=self.space.scenario.text or "(none)",
                            condition=condition, candidates="\n".join(f"- {t}" for t in texts))
        trace.condition_truncated = fitted.truncated.get("condition")

        # The R selections are samples of one prompt: one request for all of them where the
        # server honours n, each cached under its own sample index either way.
        answers = await self.client.ask_samples(prompts.SELECT_FACTORS, schema=schema, samples=c.rounds,
                                                temperature=c.selection_temperature, **fitted.values)
        selections = [answer.selected for answer in answers]  # type: ignore[attr-defined]
        votes = {cand.factor_id: 0 for cand in candidates}
        invalid = 0
        for picked in selections:
            ids: list[str] = []
            for item in picked:
                fid = by_text.get(item.strip())
                if fid is None:
                    invalid += 1
                elif fid not in ids:
                    ids.append(fid)
            trace.selection_rounds.append(ids)
            for fid in ids:
                votes[fid] += 1
        trace.votes = votes
        trace.invalid_selections = invalid
        trace.voted = [cand.factor_id for cand in candidates if votes[cand.factor_id] >= c.vote_threshold]

        mapped = list(trace.voted)
        if c.reflection and mapped:
            text_of = {cand.factor_id: cand.text for cand in candidates}
            voted_texts = tuple(text_of[fid] for fid in mapped)
            fitted = fit_prompt(self.client.backend, prompts.REFLECT_FACTORS, condition=condition,
                                factors="\n".join(f"- {t}" for t in voted_texts))
            trace.condition_truncated = merge_truncations(trace.condition_truncated, fitted.truncated.get("condition"))
            answer = await self.client.ask(
                prompts.REFLECT_FACTORS, schema=prompts.choice_list_schema("Reflection", "keep", voted_texts),
                **fitted.values,
            )
            keep: set[str] = set()
            for item in answer.keep:  # type: ignore[attr-defined]
                fid = by_text.get(item.strip())
                if fid is None or fid not in mapped:
                    trace.reflection_invalid += 1
                else:
                    keep.add(fid)
            trace.reflection_removed = [fid for fid in mapped if fid not in keep]
            mapped = [fid for fid in mapped if fid in keep]
        trace.mapped = mapped
        return trace
