"""The report's sections of results: the header, the runs, pairwise F1 (the paper's Table 1),
decisions and fact checking (Table 2), ablations (Table 3) and calibration."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anchor.evaluation.datasets.bundled import PAPER_FACTCHECK_SETS
from anchor.evaluation.report.markdown import format_delta, md_table, number
from anchor.evaluation.report.names import (
    APPROX_MARK,
    APPROXIMATE_DATASETS,
    DASH,
    DIRECT_MARK,
    HEADLINE_METRIC,
    METRIC_WORDS,
    MINUS,
    ORACLE_MARK,
    PAIRWISE_F1,
    SMALL_MARK,
    SMALL_WARNING,
)
from anchor.evaluation.report.runs import ReportedRun, row_labels, shared_line
from anchor.methods.registry import DIRECT_METHODS, METHODS
from anchor.scoring.scores import missing_class


def header_section(runs: Sequence[ReportedRun]) -> list[str]:
    lines = ["# ANCHOR evaluation report", ""]
    lines.append(f"Generated from {len(runs)} run director{'y' if len(runs) == 1 else 'ies'}.")
    lines.append("")
    llms: dict[tuple[str, str, str], list[ReportedRun]] = {}
    for r in runs:
        llms.setdefault(r.llm_key, []).append(r)
    lines.append("**LLM" + ("s" if len(llms) > 1 else "") + " used:**")
    lines.append("")
    for (model, backend, base_url), group in llms.items():
        where = f" at {base_url}" if base_url else ""
        small = f" {SMALL_MARK} (embedded 135M model)" if any(r.small for r in group) else ""
        lines.append(f"- `{model}` — {backend} backend{where}{small}; {len(group)} run director"
                     f"{'y' if len(group) == 1 else 'ies'}")
    lines.append("")
    small = [r for r in runs if r.small]
    if small:
        which = "All runs in this report" if len(small) == len(runs) else f"Runs marked {SMALL_MARK}"
        lines.append(f"**⚠ {which} — {SMALL_WARNING}.**")
        lines.append("")
    for dataset in sorted({r.dataset for r in runs if r.dataset in APPROXIMATE_DATASETS}):
        lines.append(f"**{APPROX_MARK} {APPROXIMATE_DATASETS[dataset]}**")
        lines.append("")
    for kind, dataset in dict.fromkeys((r.kind, r.dataset) for r in runs if r.shared is not None):
        line = shared_line([r for r in runs if (r.kind, r.dataset) == (kind, dataset)])
        lines += [f"**{dataset} ({kind}): {line}**", ""]
    if any(r.oracle for r in runs):
        lines.append(f"**{ORACLE_MARK} Factor-based is an oracle baseline: it is handed the gold-aligned "
                     "factor, information no real method has. Its numbers are an unfair upper reference, "
                     "not a competitor.**")
        lines.append("")
    return lines


def runs_section(runs: Sequence[ReportedRun]) -> list[str]:
    lines = ["## Runs", ""]
    rows = []
    for r in runs:
        spec = METHODS.get(r.loaded.config.method)
        spaces = str(r.loaded.config.spaces) if spec is not None and spec.per_scenario_artefact else DASH
        rows.append([r.tag, r.kind, r.dataset_label, r.name, r.model_cell, str(r.m.n_instances), str(r.m.n_runs), spaces,
                     str(r.m.n_abstained), str(r.m.n_failed)])
    lines += md_table(["Directory", "Kind", "Dataset", "Method", "Model", "Instances", "Runs", "Spaces", "Abstained",
                     "Failed"], rows, ["l", "l", "l", "l", "l", "r", "r", "l", "r", "r"])
    if any(r.m.n_failed or r.m.n_abstained for r in runs):
        lines += ["", "Abstained counts predictions where the method said 'unknown'; Failed counts predictions the "
                      "run could not make (no usable answer from the LLM, or the server unreachable). Both are "
                      "unknown in the metrics (metrics.json's runs[].unknown counts them together); failed ones "
                      "are retried when `anchor eval` is run again."]
    fallback = [r for r in runs if r.m.fallback]
    if fallback:
        lines += ["", "Fallbacks (the method said 'unknown' and another answered, as the paper does for BIRD on "
                      "decision data; counted as that method's answer in the metrics):", ""]
        lines += [f"- `{r.tag}`: {r.m.n_fallback} of {r.m.n_instances * r.m.n_runs} prediction(s) answered by "
                  f"{r.m.fallback}" for r in fallback]
    notes = [(r, n) for r in runs for n in r.m.notes]
    if notes:
        lines += ["", "Notes recorded by the runs:", ""]
        lines += [f"- `{r.tag}`: {n}" for r, n in notes]
    lines.append("")
    return lines


def _marks_footnotes(runs: Sequence[ReportedRun]) -> list[str]:
    notes = []
    if any(r.method in DIRECT_METHODS for r in runs):
        notes.append(f"{DIRECT_MARK} direct decision: the method states a choice, not a probability.")
    if any(r.oracle for r in runs):
        notes.append(f"{ORACLE_MARK} oracle baseline (sees the gold-aligned factor): unfair comparison, "
                     "shown for reference only.")
    if any(r.method == "compare" for r in runs):
        notes.append("Compare reads both contexts in one prompt, an advantage the other methods do not have.")
    if any(r.small for r in runs):
        notes.append(f"{SMALL_MARK} embedded 135M-parameter model: a pipeline check, not the method's "
                     "accuracy.")
    return notes


def pairwise_section(runs: Sequence[ReportedRun]) -> list[str]:
    pair = [r for r in runs if r.kind == "pairwise"]
    if not pair:
        return []
    lines = ["## Pairwise F1 (cf. the paper's Table 1)", ""]
    for dataset in sorted({r.dataset for r in pair}):
        group = sorted((r for r in pair if r.dataset == dataset), key=ReportedRun.sort_key)
        labels = row_labels(group, lambda r: (r.name, r.model))
        lines += [f"### {dataset}", ""]
        if (line := shared_line(group)) is not None:
            lines += [line, ""]
        header = ["Method", "Model", *(title for _, title in PAIRWISE_F1), "Coverage", "Runs"]
        rows = [[labels[id(r)], r.model_cell, *(r.cell(k) for k, _ in PAIRWISE_F1),
                 r.cell("coverage", percent=True), str(r.m.n_runs)] for r in group]
        lines += md_table(header, rows, ["l", "l"] + ["r"] * (len(header) - 2))
        lines += ["", "F1 on covered pairs only (both sides had a probability):", ""]
        header = ["Method", "Model", *(title for _, title in PAIRWISE_F1), "Coverage"]
        rows = [[labels[id(r)], r.model_cell, *(r.cell(f"covered_{k}") for k, _ in PAIRWISE_F1),
                 r.cell("coverage", percent=True)] for r in group]
        lines += md_table(header, rows, ["l", "l"] + ["r"] * (len(header) - 2))
        lines.append("")
        scopes = sorted({r.m.scope for r in group if r.m.scope})
        notes = [
            "Cells are mean ± sample std over the runs (no ± with a single run); "
            f"{DASH} means no value (e.g. every pair unknown). Average is the micro-averaged F1 over the "
            "three classes; Coverage is the share of pairs with a prediction (no unknown side)."
        ]
        notes += [f"Scope (from metrics.json): {s}" for s in scopes]
        notes += _missing_classes(group, labels)
        notes += _marks_footnotes(group)
        lines += [f"- {n}" for n in notes]
        lines.append("")
    return lines


def _missing_classes(group: Sequence[ReportedRun], labels: dict[int, str], covered: bool = True) -> list[str]:
    """Why a per-class F1 shows no value, where the reason is its class (no pair of it in the run)."""
    reasons: dict[str, list[str]] = {}
    for r in group:
        for key, title in PAIRWISE_F1:
            for variant, shown in ((key, title), *([(f"covered_{key}", f"{title} (covered)")] if covered else [])):
                why = missing_class(r.m.runs, variant) if r.mean(variant) is None else None
                if why is not None:
                    reasons.setdefault(f"{shown}: {why}", []).append(labels[id(r)])
    return [f"{text} ({', '.join(rows)}): its F1 is undefined, not 0, and shows {DASH}." for text, rows in reasons.items()]


def decision_section(runs: Sequence[ReportedRun]) -> list[str]:
    dec = [r for r in runs if r.kind in ("decision", "factcheck")]
    if not dec:
        return []
    # One column per (dataset, kind): fact-check datasets first, the paper's four in its order.
    columns = sorted({(r.kind, r.dataset) for r in dec}, key=_column_order)
    labels = row_labels(dec, lambda r: (r.name, r.model, r.kind, r.dataset))
    rows_by_key: dict[tuple[str, str], dict[tuple[str, str], ReportedRun]] = {}
    order: dict[tuple[str, str], tuple[Any, ...]] = {}
    for r in sorted(dec, key=ReportedRun.sort_key):
        key = (labels[id(r)], r.model_cell)
        rows_by_key.setdefault(key, {})[(r.kind, r.dataset)] = r
        order.setdefault(key, r.sort_key())
    shared = {col: next((r.shared for r in dec if (r.kind, r.dataset) == col and r.shared), None) for col in columns}
    header = ["Method", "Model"] + [
        f"{ds}{APPROX_MARK if ds in APPROXIMATE_DATASETS else ''} ({'bal. acc.' if kind == 'factcheck' else 'acc.'}"
        + (f", {s.n_shared} shared instances" if (s := shared[(kind, ds)]) else "") + ")"
        for kind, ds in columns
    ]
    rows = []
    for key in sorted(rows_by_key, key=lambda k: order[k]):
        cells = []
        for col in columns:
            r = rows_by_key[key].get(col)
            if r is None:
                cells.append("")
                continue
            cell = r.cell(HEADLINE_METRIC[r.kind])
            cov = r.mean("coverage")
            # Fact checking always states its coverage, as the paper's protocol asks.
            if cov is not None and (cov < 1.0 or r.kind == "factcheck"):
                cell += f" (cov. {cov * 100:.1f}%)"
            cells.append(cell)
        rows.append([key[0], key[1], *cells])
    lines = ["## Decisions and fact checking (cf. the paper's Table 2)", ""]
    lines += md_table(header, rows, ["l", "l"] + ["r"] * (len(header) - 2))
    lines.append("")
    fc = [ds for kind, ds in columns if kind == "factcheck"]
    dc = [ds for kind, ds in columns if kind == "decision"]
    notes = []
    if fc:
        notes.append("bal. acc. = balanced accuracy of the fact-check decision (support only above the "
                     f"decision threshold), with the share of instances that got a probability (cov.): "
                     f"{', '.join(fc)}.")
    notes += [f"{APPROX_MARK} {APPROXIMATE_DATASETS[ds]}" for ds in fc if ds in APPROXIMATE_DATASETS]
    if dc:
        notes.append("acc. = accuracy of picking the more probable outcome, unknowns counted as wrong: "
                     f"{', '.join(dc)}.")
    notes.append("Cells are mean ± sample std over the runs (no ± with a single run); an empty cell means "
                 f"the method was not run on that dataset, {DASH} that it has no value; 'cov.' is shown when "
                 "some instances got no probability.")
    notes += [line for col in columns if shared[col]
              and (line := shared_line([r for r in dec if (r.kind, r.dataset) == col])) is not None]
    notes += _marks_footnotes(dec)
    lines += [f"- {n}" for n in notes]
    lines.append("")
    return lines


def _column_order(column: tuple[str, str]) -> tuple[bool, int, str]:
    kind, dataset = column
    paper = PAPER_FACTCHECK_SETS.index(dataset) if dataset in PAPER_FACTCHECK_SETS else len(PAPER_FACTCHECK_SETS)
    return (kind != "factcheck", paper, dataset)


def ablation_section(runs: Sequence[ReportedRun]) -> list[str]:
    anchor_runs = [r for r in runs if r.method == "anchor"]
    groups: dict[tuple[str, str, str], list[ReportedRun]] = {}
    for r in anchor_runs:
        groups.setdefault((r.kind, r.dataset, r.model), []).append(r)
    lines: list[str] = []
    unmatched: list[str] = []
    for (kind, dataset, model), group in sorted(groups.items()):
        variants = sorted((r for r in group if r.ablations), key=ReportedRun.sort_key)
        fulls = [r for r in group if not r.ablations]
        if not variants:
            continue
        if not fulls:
            unmatched.append(f"{dataset} ({model})")
            continue
        full = fulls[0]
        metric = HEADLINE_METRIC[kind]
        labels = row_labels(variants, lambda r: r.name)
        if kind == "pairwise":
            header = ["Variant", "Context1", "Context2", "Same", "Average (Δ vs full)", "Coverage"]

            def row(r: ReportedRun, label: str, ref: ReportedRun | None) -> list[str]:
                avg = format_delta(r.mean("f1_micro"), ref.mean("f1_micro")) if ref else r.cell("f1_micro")
                return [label, *(r.cell(k) for k in ("f1_context1", "f1_context2", "f1_same")), avg,
                        r.cell("coverage", percent=True)]
        else:
            header = ["Variant", f"{METRIC_WORDS[metric].capitalize()} (Δ vs full)", "Coverage"]

            def row(r: ReportedRun, label: str, ref: ReportedRun | None, metric: str = metric) -> list[str]:
                value = format_delta(r.mean(metric), ref.mean(metric)) if ref else r.cell(metric)
                return [label, value, r.cell("coverage", percent=True)]

        rows = [row(r, labels[id(r)], full) for r in variants]
        rows.append(row(full, "ANCHOR (full)", None))
        small = f" {SMALL_MARK}" if any(r.small for r in group) else ""
        approx = APPROX_MARK if dataset in APPROXIMATE_DATASETS else ""
        lines += [f"### {dataset}{approx} — {model}{small}", ""]
        if (line := shared_line(group)) is not None:
            lines += [line, ""]
        lines += md_table(header, rows)
        lines.append("")
        lines.append(f"- Δ = variant mean minus the full model's mean ({METRIC_WORDS[metric]}), from "
                     f"`{full.tag}`; {MINUS} is a drop, + a gain. Other cells are mean ± std over runs.")
        if kind == "pairwise":
            named = {**labels, id(full): "ANCHOR (full)"}
            lines += [f"- {note}" for note in _missing_classes([*variants, full], named, covered=False)]
        if len(fulls) > 1:
            lines.append(f"- {len(fulls)} full ANCHOR runs match; the reference is the first given, "
                         f"`{full.tag}`.")
        if any(r.small for r in group):
            lines.append(f"- {SMALL_MARK} {SMALL_WARNING}.")
        if dataset in APPROXIMATE_DATASETS:
            lines.append(f"- {APPROX_MARK} {APPROXIMATE_DATASETS[dataset]}")
        lines.append("")
    if not lines and not unmatched:
        return []
    out = ["## Ablations (cf. the paper's Table 3)", ""] + lines
    if unmatched:
        out += [f"Ablation runs without a full ANCHOR run on the same dataset and model (no deltas): "
                f"{'; '.join(unmatched)}.", ""]
    return out


def calibration_section(runs: Sequence[ReportedRun], glabels: dict[int, str]) -> list[str]:
    cal = [r for r in runs if r.m.calibration]
    if not cal:
        return ["## Calibration", "", "No run recorded calibration data.", ""]
    lines = ["## Calibration", ""]
    for r in cal:
        c = r.m.calibration or {}
        brier, ece = number(c.get("brier")), number(c.get("ece"))
        used = sum(int(b.get("count") or 0) for b in c.get("reliability") or [])
        skipped = c.get("n_skipped")
        parts = [f"Brier {brier:.3f}" if brier is not None else f"Brier {DASH}",
                 f"ECE {ece:.3f}" if ece is not None else f"ECE {DASH}"]
        extra = f"{used} probabilities binned" if used else "no probabilities binned"
        if skipped:
            extra += f", {skipped} unknown skipped"
        if c.get("event"):
            extra += f"; event: {c['event']}"
        if r.shared is not None:
            extra += f"; on the {r.shared.n_shared} instance(s) of {r.dataset} every run of it scored"
        lines.append(f"- {glabels[id(r)]}: {', '.join(parts)} ({extra})")
    lines += ["", "Lower is better for both. Unknowns are left out, so a method that abstains often is "
              "scored on fewer, possibly easier, instances. With few instances per bin (and pairwise data, "
              "whose comparisons are local to a scenario) the ECE is noisy; read it together with the "
              "reliability diagram's bin counts.", ""]
    return lines


def cases_section(runs: Sequence[ReportedRun]) -> list[str]:
    """A user's own cases (``anchor predict``): every method on the file's labelled rows, side by side."""
    cases = sorted((r for r in runs if r.kind == "cases"), key=ReportedRun.sort_key)
    if not cases:
        return []
    labels = row_labels(cases, lambda r: (r.name, r.model))
    header = ["Method", "Model", "Rows", "Labelled", "Accuracy", "Bal. acc.", "Coverage", "Brier", "Log loss", "ECE"]
    rows = []
    for r in cases:
        run = r.m.runs[0] if r.m.runs else {}
        cal = r.m.calibration or {}
        labelled = int(run.get("labelled") or 0)
        cells = [r.cell(k) for k in ("accuracy", "balanced_accuracy")] + [r.cell("coverage", percent=True)]
        cells += [_fixed(cal.get(k)) for k in ("brier", "log_loss", "ece")]
        rows.append([labels[id(r)], r.model_cell, str(int(run.get("n") or r.m.n_instances)), str(labelled),
                     *(cells if labelled else [DASH] * 6)])
    recorded = cases[0].loaded.config.data_path
    source = Path(recorded).name if recorded else "the cases file"  # the name: the path is the run's config.json's
    lines = [f"## Your cases ({source})", ""]
    lines += md_table(header, rows, ["l", "l"] + ["r"] * (len(header) - 2))
    lines.append("")
    notes = ["Scored on the rows with a label only (Labelled); rows without one are predictions only. Accuracy "
             "and balanced accuracy decide outcome 1 above 0.5 and outcome 2 below, an unknown or a tie counting "
             "as wrong; Coverage is the share of labelled rows with a probability; Brier, log loss and ECE are "
             "over the labelled rows with one."]
    if (line := shared_line(cases)) is not None:
        notes.append(line)
    notes += _marks_footnotes(cases)
    lines += [f"- {n}" for n in notes]
    lines.append("")
    return lines


def _fixed(value: object) -> str:
    x = number(value)
    return DASH if x is None else f"{x:.3f}"
