"""Stage-2 settings, in a module of their own so that reading them (the command line does, for its
help and checks) does not import the retrieval stack."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, Field

#: Candidate-search backends by name (built by :func:`anchor.mapping.retrievers.make_retriever`).
RETRIEVER_NAMES = ("knn", "faiss-flat", "faiss-hnsw", "bm25")
RetrieverName = Literal["knn", "faiss-flat", "faiss-hnsw", "bm25"]


class MappingConfig(BaseModel):
    """Stage-2 settings (paper defaults: K1=3, K2=5, alpha=0.5, R=3, vote ratio 0.5)."""

    k1: int = Field(default=3, ge=1, description="Clusters kept by the coarse search.")
    k2: int = Field(default=5, ge=1, description="Factors kept per cluster (and among unclustered ones).")
    alpha: float = Field(default=0.5, ge=0, le=1, description="Theme weight in a cluster prototype.")
    rounds: int = Field(default=3, ge=1, description="R: independent LLM selections.")
    vote_ratio: float = Field(default=0.5, gt=0, le=1)
    selection_temperature: float = Field(default=0.7, ge=0, le=2, description=(
        "Temperature of the R selections (not given in the paper): high enough that they can disagree."))
    reflection: bool = True
    hierarchical: bool = Field(default=True, description="False = the 'w/o hierarchy' ablation (flat KNN).")
    metric: str = Field(default="euclidean", pattern="^(euclidean|cosine)$")
    retriever: RetrieverName = Field(default="knn", description=(
        "Candidate search: exact KNN (the paper's), FAISS flat or HNSW, or BM25 over factor and theme texts. "
        "Anchor builds it with make_retriever unless it is given a retriever object."))

    @property
    def vote_threshold(self) -> int:
        return max(1, math.ceil(self.vote_ratio * self.rounds - 1e-9))
