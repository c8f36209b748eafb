"""A factor space as it stood after its first ``N`` factors, by abduction order.

Used by the factor-count analysis (``anchor analyze factors``) and by evaluations that set
``RunConfig.max_factors``: a space is built once at full size and then viewed at several sizes,
instead of being rebuilt per size.

Truncation keeps the full build's clusters and theme names (it does not re-cluster): a cluster
left without members is dropped, vectors are kept for the kept factors and themes only. A factor
pruned as a repeat of a factor that is cut away is put back into its cluster, since with its
original gone it no longer repeats anything. The result says it was truncated in
``clustering.note``; ``params.n_target`` becomes ``N`` and ``stop_reason`` "target_reached", which
is what a build stopped at ``N`` factors would report. LLM cost and timings are the full build's.
"""

from __future__ import annotations

from anchor.types import Cluster, EmbeddingMatrix, FactorSpace, PrunedFactor, SpaceEmbeddings, StopReason


def _id_number(factor_id: str) -> int:
    return int(factor_id[1:])  # ids are "f" + digits (validated by Factor)


def abduction_order(space: FactorSpace) -> list[str]:
    """Factor ids in the order abduction found them: by round, then by id number."""
    return [f.id for f in sorted(space.factors, key=lambda f: (f.round, _id_number(f.id)))]


def truncate_space(space: FactorSpace, n: int) -> FactorSpace:
    """The space restricted to its first ``n`` factors in abduction order (see the module notes).

    ``n`` counts every abduced factor, pruned ones included, as the build did while it grew. With
    ``n`` at or above the number of factors the space is returned unchanged (as a copy).
    """
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    n = int(n)
    total = len(space.factors)
    if n >= total:
        return space.model_copy(deep=True)

    kept = set(abduction_order(space)[:n])
    clusters: list[Cluster] = []
    for cluster in space.clusters:
        members = [fid for fid in cluster.factor_ids if fid in kept]
        pruned: list[PrunedFactor] = []
        for p in cluster.pruned:
            if p.factor_id not in kept:
                continue
            if p.duplicate_of is not None and p.duplicate_of not in kept:
                members.append(p.factor_id)  # its original is cut away: it repeats nothing now
            else:
                pruned.append(p.model_copy())
        if members:
            clusters.append(Cluster(id=cluster.id, theme=cluster.theme, factor_ids=members, pruned=pruned))
    placed = {fid: c.id for c in clusters for fid in c.factor_ids}
    unclustered = [fid for fid in space.unclustered if fid in kept]

    factors = []
    for f in space.factors:
        if f.id in kept:
            factors.append(f.model_copy(update={"cluster_id": placed.get(f.id)}))

    embeddings = None
    if space.embeddings is not None:
        embeddings = _truncate_embeddings(space.embeddings, kept, {c.id for c in clusters})

    kept_texts = {f.text for f in factors}
    last_round = max((f.round for f in factors), default=0)
    rounds = [r.model_copy(update={"added": [t for t in r.added if t in kept_texts]})
              for r in space.rounds if r.round <= last_round]

    stats = space.clustering.model_copy(update={
        "n_factors": n,
        "n_clusters": len(clusters),
        "n_unclustered": len(unclustered),
        "silhouette": None,  # computed on the full set; not recomputed for a subset
        "note": "; ".join(x for x in (
            space.clustering.note,
            f"truncated to the first {n} of {total} factors by abduction order; clusters and themes are the "
            "full build's (not re-clustered)") if x),
    })
    truncated = space.model_copy(update={
        "factors": factors,
        "clusters": clusters,
        "unclustered": unclustered,
        "embeddings": embeddings,
        "rounds": rounds,
        "clustering": stats,
        "stop_reason": StopReason.TARGET_REACHED,
        "params": space.params.model_copy(update={"n_target": n}),
    }, deep=True)
    # model_copy skips validation; validating again checks the result is a consistent space.
    return FactorSpace.model_validate(truncated.model_dump())


def _truncate_embeddings(emb: SpaceEmbeddings, kept: set[str], clusters: set[int]) -> SpaceEmbeddings:
    rows = [i for i, fid in enumerate(emb.factor_ids) if fid in kept]
    factors = EmbeddingMatrix.from_array(emb.factors.model, emb.factors.to_array()[rows])
    themes = None
    cluster_ids = [cid for cid in emb.cluster_ids if cid in clusters]
    if emb.themes is not None:
        theme_rows = [i for i, cid in enumerate(emb.cluster_ids) if cid in clusters]
        themes = EmbeddingMatrix.from_array(emb.themes.model, emb.themes.to_array()[theme_rows])
    return SpaceEmbeddings(factor_ids=[emb.factor_ids[i] for i in rows], factors=factors,
                           cluster_ids=cluster_ids, themes=themes)
