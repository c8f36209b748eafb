"""The phase of an LLM request's stage (factor construction, mapping, inference, a baseline's call),
shared by ``anchor cost`` and the cost tables of ``anchor report``."""

from __future__ import annotations

#: Phases in display order; a stage's phase comes from its name (``phase_of``).
PHASES = ("construction", "mapping", "inference", "baseline", "other")


def phase_of(stage: str) -> str:
    """construction: building the per-scenario artefact (ANCHOR's abduction, voting and themes; BIRD's
    sentences, factors, labels and CPT data); mapping: a condition onto factors (ANCHOR's selection and
    reflection, BIRD's value choice, reflection and relaxed pass); inference: ANCHOR's parameter
    elicitation; baseline: a direct baseline's call (e.g. BIRD's CoT fallback)."""
    if stage.startswith(("abduction.", "space.")) or stage in ("voting", "themes") or stage in (
            "bird.sentences", "bird.factors", "bird.labels", "bird.cpt_data"):
        return "construction"
    if stage.startswith(("mapping.", "bird.mapping")) or stage == "bird.reflect":
        return "mapping"
    if stage.startswith("inference."):
        return "inference"
    if stage.startswith("baseline."):
        return "baseline"
    return "other"
