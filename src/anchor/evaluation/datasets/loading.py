"""Any benchmark dataset by name (:data:`DATASET_NAMES`), from its family's loader."""

from __future__ import annotations

from pathlib import Path

from anchor.evaluation.datasets.bundled import DATASET_NAMES, is_factcheck_dataset
from anchor.evaluation.datasets.decision import load_decision
from anchor.evaluation.datasets.factcheck import factcheck_ids_name, load_factcheck
from anchor.evaluation.datasets.instances import DecisionInstance, PairwiseInstance
from anchor.evaluation.datasets.pairwise import load_pairwise


def load_dataset(
    name: str, path: str | Path | None = None
) -> list[DecisionInstance] | list[PairwiseInstance]:
    """Load a dataset by name (one of :data:`DATASET_NAMES`); ``path`` None reads the bundled copy."""
    if name == "common2sense-pairwise":
        return load_pairwise(path)
    if name in ("common2sense", "plasma", "today"):
        return load_decision(name, path)  # type: ignore[arg-type]
    if is_factcheck_dataset(name):
        return load_factcheck(path, dataset=factcheck_ids_name(name))
    raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASET_NAMES)}")
