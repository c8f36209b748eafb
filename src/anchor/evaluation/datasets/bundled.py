"""The names of the benchmark datasets and their packaged files (``anchor/data/``, see
``data/PROVENANCE.md``), read through ``importlib.resources``."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

#: Bundled fact-checking files by dataset name (folder ``factcheck/``); all share one format.
FACTCHECK_FILES: dict[str, str] = {
    "cnn": "aggrefact_cnn.jsonl",
    "xsum": "aggrefact_xsum.jsonl",
    "expertqa": "expertqa.jsonl",
    "covid": "covidfact_sample.jsonl",
    "factcheck": "covidfact_sample.jsonl",  # the older, generic name of the COVID-Fact sample
}
#: Fact-checking sets in the column order of the paper's Table 2.
PAPER_FACTCHECK_SETS: tuple[str, ...] = ("expertqa", "xsum", "covid", "cnn")
DATASET_NAMES: tuple[str, ...] = (
    "common2sense-pairwise", "common2sense", "plasma", "today", "factcheck", "cnn", "xsum", "expertqa", "covid",
)

_BUNDLED: dict[str, tuple[str, str]] = {
    "common2sense-pairwise": ("bird", "common2sense_human_annotation.csv"),
    "common2sense": ("bird", "common2sense.json"),
    "plasma": ("bird", "plasma.json"),
    "today": ("bird", "today.json"),
    **{name: ("factcheck", filename) for name, filename in FACTCHECK_FILES.items()},
}


def is_factcheck_dataset(name: str) -> bool:
    """True for the fact-checking datasets (``factcheck``, ``cnn``, ``xsum``, ``expertqa``, ``covid``)."""
    return name in FACTCHECK_FILES


def bundled_file(name: str) -> Traversable:
    """The packaged copy of dataset ``name`` (one of :data:`DATASET_NAMES`)."""
    if name not in _BUNDLED:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(DATASET_NAMES)}")
    folder, filename = _BUNDLED[name]
    return resources.files("anchor").joinpath("data").joinpath(folder).joinpath(filename)
