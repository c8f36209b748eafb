"""What a reproduction covers: the paper's tables, figures and appendix analyses a user picked, the
number of runs, the slice (the paper's, or ``--quick``) and the data files given for the datasets.

:class:`Selection` is the checked form of ``anchor reproduce``'s options; the planner
(:mod:`anchor.reproduce.plan`) turns it into runs. Bad values raise :class:`SelectionError`, whose
message names the option.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from anchor.errors import AnchorError
from anchor.evaluation.datasets.bundled import DATASET_NAMES, PAPER_FACTCHECK_SETS

TABLES = ("1", "2", "3", "4")
FIGURES = ("cost", "factors")
APPENDIX = ("retrieval", "clustering", "estimator")
#: Where each part of the selection is in the published data (``PublishedSource.id``).
SOURCES: dict[str, tuple[str, ...]] = {
    "1": ("tab:main-results",),
    "2": ("tab:combined_comparison",),
    "3": ("tab:ablation_results",),
    "4": ("tab:bird_on_harbor",),
    "cost": ("fig:time_token_api_cost_left",),
    "factors": ("fig:time_token_api_cost_right",),
    "retrieval": ("fig:retrieval_k_compare",),
    "clustering": ("fig:clustering_comparison",),
    "estimator": ("tab:llm-calib-performance", "tab:llm-calib-distribution", "fig:factor-calibration"),
}
PAIRWISE = "common2sense-pairwise"
#: Table 2's datasets in the paper's column order.
DECISION_SETS = (*PAPER_FACTCHECK_SETS, "today", "plasma")
#: Table 8's datasets (the estimator analysis).
ESTIMATOR_SETS = ("cnn", "expertqa", "plasma", "today")
#: The paper's model for Tables 2 and 4 and the cost figure, and the default to compare with.
PAPER_MAIN_MODEL = "Qwen2.5-72B"
PAPER_RUNS = 5

#: --quick: instances per dataset (the first of the dataset's order or sample), on a server and on the
#: embedded model (where a request takes seconds), and per analysis cell.
QUICK_LIMITS = {"pairwise": 2, "decision": 2, "factcheck": 1}
QUICK_EMBEDDED_LIMITS = {"pairwise": 1, "decision": 1, "factcheck": 1}
QUICK_ANALYSIS_LIMIT = 1
QUICK_FACTOR_POINTS = 4
#: --quick: complete assignments BIRD judges for its CPT (the paper's 128), as the quick build sizes are to ANCHOR's.
QUICK_BIRD_SAMPLES = 16


class SelectionError(AnchorError, ValueError):
    """A reproduction that cannot be planned: the message names the option to change."""


class Selection(BaseModel):
    """The parts of the paper to reproduce and how (checked; see :func:`make_selection`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tables: tuple[str, ...] = TABLES
    figures: tuple[str, ...] = FIGURES
    appendix: tuple[str, ...] = ("retrieval", "clustering")
    runs: int = Field(default=PAPER_RUNS, ge=1, description="Runs of every method (seeds seed, seed + 1, ...).")
    quick: bool = Field(default=False, description="A tiny slice of every part, to see it work.")
    embedded: bool = Field(default=False, description="On the embedded model: --quick's slice is smaller still.")
    data: dict[str, Path] = Field(default_factory=dict, description="Dataset -> the file to read instead of the "
                                                                    "bundled copy.")
    paper_model: str = Field(default=PAPER_MAIN_MODEL, description="The paper's model whose cells are shown "
                                                                    "beside ours.")
    model_runs: dict[str, Path] = Field(default_factory=dict, description=(
        "Another of the paper's models -> a finished reproduction of it, whose runs the claims comparing two "
        "models read (--model-runs)."))

    @property
    def parts(self) -> tuple[str, ...]:
        return (*self.tables, *self.figures, *self.appendix)

    @property
    def sources(self) -> tuple[str, ...]:
        """The published tables and figures this selection reproduces, in the paper's order."""
        return tuple(s for part in self.parts for s in SOURCES[part])

    def wants(self, *parts: str) -> bool:
        return any(p in self.parts for p in parts)

    def limit(self, kind: str) -> int | None:
        """Instances per run of a dataset of ``kind``: all (the paper's slice), or --quick's few."""
        if not self.quick:
            return None
        return (QUICK_EMBEDDED_LIMITS if self.embedded else QUICK_LIMITS)[kind]


def parse_choices(text: str | None, allowed: Iterable[str], option: str) -> tuple[str, ...] | None:
    """``"1,4"`` -> ``("1", "4")`` in the order of ``allowed``; None for None; SelectionError naming
    ``option`` for a name not allowed or an empty list. ``none`` selects nothing."""
    if text is None:
        return None
    allowed = tuple(allowed)
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if names == ["none"]:
        return ()
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        what = f"unknown {unknown[0]!r}" if unknown else "nothing given"
        raise SelectionError(f"{option} {text!r}: {what}; give a comma-separated list of {', '.join(allowed)} "
                             "(or none)")
    return tuple(a for a in allowed if a in names)


def parse_data(items: Iterable[str]) -> dict[str, Path]:
    """``--data DATASET=FILE`` (repeatable) -> {dataset: path}; the file must exist."""
    out: dict[str, Path] = {}
    for item in items:
        name, sep, file = item.partition("=")
        name = name.strip()
        if not sep or not name or not file.strip():
            raise SelectionError(f"--data {item!r}: give DATASET=FILE, e.g. covid=COVIDFACT_dataset.jsonl")
        if name not in DATASET_NAMES:
            raise SelectionError(f"--data {item!r}: unknown dataset {name!r}; choose from {', '.join(DATASET_NAMES)}")
        path = Path(file.strip()).expanduser()
        if not path.is_file():
            raise SelectionError(f"--data {item!r}: no such file {str(path)!r}")
        if name in out:
            raise SelectionError(f"--data: {name} given twice")
        out[name] = path
    return out


def parse_model_runs(items: Iterable[str], known_models: Iterable[str]) -> dict[str, Path]:
    """``--model-runs PAPER_MODEL=DIR`` (repeatable) -> {paper model: folder}; the folder must hold a
    reproduction (its ``runs`` folder)."""
    models = tuple(known_models)
    out: dict[str, Path] = {}
    for item in items:
        name, sep, folder = item.partition("=")
        name, folder = name.strip(), folder.strip()
        if not sep or not name or not folder:
            raise SelectionError(f"--model-runs {item!r}: give PAPER_MODEL=DIR, e.g. Qwen2.5-32B=runs/reproduce-32b")
        if models and name not in models:
            raise SelectionError(f"--model-runs {item!r}: the paper has cells for {', '.join(models)}")
        path = Path(folder).expanduser()
        if not (path / "runs").is_dir():
            raise SelectionError(f"--model-runs {item!r}: {str(path)!r} holds no reproduction (no runs folder)")
        if name in out:
            raise SelectionError(f"--model-runs: {name} given twice")
        out[name] = path
    return out


def make_selection(*, tables: str | None = None, figures: str | None = None, appendix: str | None = None,
                   runs: int | None = None, quick: bool = False, data: Iterable[str] = (),
                   paper_model: str | None = None, known_models: Iterable[str] = (),
                   embedded: bool = False, model_runs: Iterable[str] = ()) -> Selection:
    """The checked selection from ``anchor reproduce``'s options (None: not given). Given none of
    --tables, --figures and --appendix, it is the default selection; given some, the parts named only.
    Without --runs a reproduction runs every method 5 times, as the paper's Tables 1 and 2 did; --quick
    runs it once."""
    chosen_runs = runs if runs is not None else (1 if quick else PAPER_RUNS)
    if chosen_runs < 1:
        raise SelectionError(f"--runs {chosen_runs}: give 1 or more")
    models = tuple(known_models)
    if paper_model is not None and models and paper_model not in models:
        raise SelectionError(f"--paper-model {paper_model!r}: the paper has cells for {', '.join(models)}")
    picked = {"tables": parse_choices(tables, TABLES, "--tables"),
              "figures": parse_choices(figures, FIGURES, "--figures"),
              "appendix": parse_choices(appendix, APPENDIX, "--appendix")}
    # Naming some parts selects those only; naming none selects the defaults (everything but the estimator).
    named = any(v is not None for v in picked.values())
    fields = {k: (v or ()) for k, v in picked.items()} if named else {}
    selection = Selection(**fields, runs=chosen_runs, quick=quick, embedded=embedded, data=parse_data(data),
                          model_runs=parse_model_runs(model_runs, models),
                          **({"paper_model": paper_model} if paper_model else {}))
    if paper_model is not None:
        check_model_runs(selection)
    if not selection.parts:
        raise SelectionError("--tables, --figures and --appendix select nothing; pick at least one part")
    return selection


def check_model_runs(selection: Selection) -> None:
    """Refuse runs given for the very model this reproduction's own runs stand for."""
    if selection.paper_model in selection.model_runs:
        raise SelectionError(f"--model-runs {selection.paper_model}={selection.model_runs[selection.paper_model]}: "
                             f"this reproduction's own model stands for {selection.paper_model} (--paper-model, or "
                             "the served model's name); give the runs of another of the paper's models")


def paper_model_for(served: str | None, known: Iterable[str]) -> str:
    """The paper's model that the served model's name points to (``qwen2.5-32b-instruct`` ->
    ``Qwen2.5-32B``), else the paper's main model."""
    name = (served or "").lower().replace("_", "-")
    for model in known:
        size = model.lower().rsplit("-", 1)[-1]
        family = model.lower().split("-", 1)[0]
        if model and family in name and size in name.split("/")[-1].split("-"):
            return model
    return PAPER_MAIN_MODEL
