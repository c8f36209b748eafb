"""Evaluation metrics for the analysis tests, computed by the real runner from hand-made predictions
(so the analyses are tested against what ``anchor eval`` actually writes)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from anchor.evaluation.driver import EvalRunner
from anchor.evaluation.run_config import make_run_config
from anchor.llm.settings import LLMSettings
from anchor.metrics import pairwise_prediction
from anchor.rundir.records import MetricsReport, Prediction
from anchor.runs.session import RunOptions
from anchor.types import Scenario


def pair(i: int, human: int, p1: float | None, p2: float | None, run: int = 0) -> Prediction:
    """A pairwise prediction: P(gold | condition 1) = p1, P(gold | condition 2) = p2 (None = unknown)."""
    prediction = pairwise_prediction(p1, p2)
    return Prediction(run=run, id=f"pair{i}", seed=run, kind="pairwise", human=human, gold=1, p_gold_1=p1,
                      p_gold_2=p2, prediction=prediction, unknown=prediction is None)


def decision(i: int, label: int, p1: float | None, run: int = 0) -> Prediction:
    prediction = None if p1 is None else 1 if p1 > 0.5 else 2 if p1 < 0.5 else None
    return Prediction(run=run, id=f"inst{i}", seed=run, kind="decision", label=label, p_outcome1=p1,
                      prediction=prediction, unknown=p1 is None)


def metrics(tmp_path: Path, predictions: list[Prediction], *, dataset: str = "common2sense-pairwise",
            runs: int = 1, server: bool = True) -> MetricsReport:
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1" if server else None, model="m" if server else None,
                           cache_dir=tmp_path / "cache")
    config = make_run_config(dataset=dataset, method="anchor", data_path=None, ablations=[], limit=None, runs=runs,
                             seed=0, settings=settings, anchor_config=None)
    runner = EvalRunner(config, tmp_path / "run", RunOptions(settings))
    ids = list(dict.fromkeys(p.id for p in predictions))
    # Each hand-made instance stands for a scenario of its own (the critical path is per scenario).
    instances = [SimpleNamespace(id=i, scenario=Scenario(text=f"scenario {i}", outcome1="yes", outcome2="no"))
                 for i in ids]
    return runner.compute_metrics(instances,  # type: ignore[arg-type]
                                  {(p.run, p.id): p for p in predictions})
