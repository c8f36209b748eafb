"""The paper's names and marks in the report: the ablation names, the marks that flag a direct choice,
an oracle, the embedded model or an approximate dataset, and the headline metrics. A method's own
name and its place in the tables are on its registry entry (``MethodSpec.title``, ``table_rank``)."""

from __future__ import annotations

from collections.abc import Sequence

from anchor.methods.registry import METHODS, ORACLE_METHODS

DASH = "–"  # en dash: the cell of a missing (null) value
MINUS = "−"  # proper minus sign for negative deltas
SMALL_MARK = "§"
ORACLE_MARK = "†"
DIRECT_MARK = "⋆"
SMALL_WARNING = (
    "numbers from a 135M-parameter embedded model: they show the pipeline works, not the method's accuracy"
)
APPROX_MARK = "‡"
#: Datasets that stand in for the paper's and must say so wherever their numbers appear.
APPROXIMATE_DATASETS: dict[str, str] = {
    "expertqa": "expertqa is built from the ExpertQA release (claims with their cited evidence); it approximates, "
                "but is not, the LLM-AggreFact ExpertQA subset the paper most likely used (its evidence averages "
                "922 characters against the paper's 2,399), so its numbers are not comparable with the paper's.",
}

ABLATION_NAMES: dict[str, str] = {
    "no-cbn": "w/o cbn",
    "no-nb": "w/o nb",
    "no-cluster": "w/o cluster",
    "no-hierarchy": "w/o hierarchy",
    "no-pe-llm": "w/o pe-llm",
    "bma": "BMA",
}
ABLATION_ORDER = tuple(ABLATION_NAMES)
PAIRWISE_F1 = (("f1_context1", "Context1"), ("f1_context2", "Context2"), ("f1_same", "Same"),
               ("f1_micro", "Average"))
HEADLINE_METRIC = {"pairwise": "f1_micro", "decision": "accuracy", "factcheck": "balanced_accuracy", "cases": "accuracy"}
METRIC_WORDS = {
    "f1_micro": "F1 Avg (micro)", "accuracy": "accuracy", "balanced_accuracy": "balanced accuracy",
}


def display_name(method: str, ablations: Sequence[str] = (), oracle: bool = False) -> str:
    """The paper's name for a method (``Vanilla⋆``, ``Factor-based†``, ``ANCHOR (w/o cbn)``)."""
    spec = METHODS.get(method)
    name = spec.title if spec is not None and spec.title else method
    if spec is not None and spec.direct:
        name += DIRECT_MARK
    if ablations:
        name += " (" + ", ".join(ABLATION_NAMES.get(a, a) for a in ablations) + ")"
    if (oracle or method in ORACLE_METHODS) and not name.endswith(ORACLE_MARK):
        name += ORACLE_MARK
    return name
