"""``anchor truth``: synthetic worlds whose true probabilities are known, and runs scored against them.

``make`` writes a world file (and its cases file for ``anchor predict``); ``serve`` answers from it as an
OpenAI-compatible server (:mod:`anchor.cli.truth_serve`); ``score`` scores a finished run whose rows carry
the truth; ``bench`` scores every method over sweeps of the simulated LLM's errors
(:mod:`anchor.cli.truth_bench`). Each command is one function registered on :data:`app`; a new one is another function and one
``app.command`` line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from anchor.cli.build import JsonOut
from anchor.cli.console import emit_json, err, fail, friendly_errors, out
from anchor.cli.options import NetworkOptions, WorldOptions, expand_options, opt
from anchor.cli.truth_bench import bench_command
from anchor.cli.truth_serve import serve_command
from anchor.files import check_destination

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.

app = typer.Typer(help=(
    "Known truth: synthetic worlds (a scenario, two outcomes and a hidden Bayesian network over its factors) "
    "whose true P(outcome1 | condition) is computed exactly, and any run over their cases scored against that "
    "truth. See docs/known-truth.md."), no_args_is_help=True)

OUTPUT_PANEL = "Output"
CASES_SUFFIXES = (".csv", ".jsonl")


@expand_options
def make_command(
    context: typer.Context,
    worlds: WorldOptions,
    networks: NetworkOptions,
    out_path: Annotated[Path, opt("--out", "-o", panel=OUTPUT_PANEL, help=(
        "Where to write the world file (JSON: the worlds, their hidden networks, conditions and truth)."),
        default=Path("worlds.json"))] = Path("worlds.json"),
    cases: Annotated[Path | None, opt("--cases", panel=OUTPUT_PANEL, help=(
        "Also write the worlds' conditions as a cases file for `anchor predict` (.csv or .jsonl; columns id, "
        "scenario, outcome1, outcome2, condition, label, p_true)."))] = None,
) -> None:
    """Generate worlds of known truth: seeded, the same file for the same settings.

    Each world draws a scenario and themes from anchor's own bank of texts, a hidden network of the
    structure asked for, and conditions of four kinds (factors stated plainly, in other words, with
    unrelated content, and nothing at all), each with its exact P(outcome1) and a label drawn from it.
    Example: anchor truth make --structure all --worlds 2 --conditions 20 --seed 1 --out worlds.json --cases
    cases.csv

    With --network, the worlds are published Bayesian networks that pgmpy ships instead (one world each,
    the truth exact inference in the network). Example: anchor truth make --network asia --cases cases.csv
    """
    from anchor.truth.cases import write_cases
    from anchor.truth.world import save_worlds

    with friendly_errors({"n_worlds": "--worlds", "n_conditions": "--conditions", "seed": "--seed", "prior": "--prior"}):
        if networks.names() == ["list"]:
            _list_networks()
            return
        if out_path.suffix.lower() != ".json":
            raise fail(f"--out {out_path}: give a .json file name")
        check_destination(out_path, "--out")
        if cases is not None:
            if cases.suffix.lower() not in CASES_SUFFIXES:
                raise fail(f"--cases {cases}: give a {' or '.join(CASES_SUFFIXES)} file name")
            check_destination(cases, "--cases")
            if cases.resolve() == out_path.resolve():
                raise fail(f"--cases {cases}: the same file as --out")
        if networks.network:
            given = [flag for flag, name in (("--structure", "structure"), ("--worlds", "worlds"))
                     if getattr(context.get_parameter_source(name), "name", "") == "COMMANDLINE"]
            if given:
                raise fail(f"{given[0]}: not with --network (a published network is the world's structure, one "
                           "world each)")
            if getattr(context.get_parameter_source("prior"), "name", "") == "COMMANDLINE":
                raise fail("--prior: not with --network (a published network's prior is its own, from its tables)")
            file = _network_file(worlds, networks)
        elif networks.outcome is not None:
            raise fail(f"--outcome {networks.outcome}: only with --network")
        else:
            from anchor.truth.generate import generate_worlds

            s = worlds.settings()
            file = generate_worlds(s.structure, s.n_worlds, s.seed, n_conditions=s.n_conditions, prior=s.prior)
        save_worlds(file, out_path)
        n_conditions = sum(len(w.conditions) for w in file.worlds)
        for w in file.worlds:
            out.print(f"{w.id}: {len(w.factors)} factors, {_model_words(w)}, {len(w.conditions)} conditions; "
                      f"{w.scenario}", markup=False, highlight=False, soft_wrap=True)
        checked = file.generator.get("cross_checked")
        if isinstance(checked, dict):
            for w in file.worlds:
                tail = "" if checked[w.id] == len(w.conditions) else " (the others: joint too large to enumerate)"
                err.print(f"{w.id}: p_true of {checked[w.id]} of {len(w.conditions)} conditions cross-checked by "
                          f"anchor's own enumeration{tail}", markup=False, highlight=False, soft_wrap=True)
        err.print(f"wrote {out_path} ({len(file.worlds)} worlds, {n_conditions} conditions)", markup=False,
                  highlight=False)
        if cases is not None:
            write_cases(file, cases)
            err.print(f"wrote {cases} ({n_conditions} rows)", markup=False, highlight=False)


def _model_words(world: object) -> str:
    """What a world's hidden model is, in a few words, for make's summary line."""
    from anchor.truth import exact
    from anchor.truth.world import World

    assert isinstance(world, World)
    net = world.network
    if net is None:
        return f"{len(world.latents)} latents"
    return (f"network {net.name} ({len(net.nodes)} of its {net.published_nodes} nodes), outcome {net.outcome_node} = "
            f"{net.outcome_state}, prior {exact.prior_outcome1(world):.4g}")


def _network_file(worlds: WorldOptions, networks: NetworkOptions) -> object:
    """The world file of ``--network``: one world per network, with --seed and --conditions."""
    from anchor.truth.networks.build import parse_outcome
    from anchor.truth.networks.source import NetworkError, OutcomeError, check_name
    from anchor.truth.networks.worlds import network_worlds

    names = networks.names()
    if not names or "list" in names:
        raise fail(f"--network {','.join(names)}: name networks, or `--network list` alone to list them")
    for name in names:
        try:
            check_name(name)
        except NetworkError as exc:
            raise fail(f"--network {name}: {exc}") from None
    try:
        outcome = parse_outcome(networks.outcome) if networks.outcome is not None else None
        if outcome is not None and len(names) != 1:
            raise fail(f"--outcome {networks.outcome}: give one --network with it ({len(names)} given)")
        return network_worlds(names, outcome=outcome, seed=worlds.seed, n_conditions=worlds.conditions)
    except OutcomeError as exc:
        raise fail(f"--outcome {networks.outcome}: {exc}") from None
    except NetworkError as exc:
        raise fail(f"--network {','.join(names)}: {exc}") from None


def _list_networks() -> None:
    from anchor.truth.networks import available_networks, written_networks

    written = set(written_networks())
    for name in available_networks():
        note = "  (texts written for it)" if name in written else ""
        out.print(f"{name}{note}", markup=False, highlight=False)


def score_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory of `anchor predict` over a cases file with a "
                                                 "p_true column (such as `anchor truth make --cases`).")],
    json_out: JsonOut = False,
) -> None:
    """Score a run against the truth: error to the true probability (MAE, RMSE, KL, cross-entropy, Brier),
    scores against the sampled labels (Brier, ECE), agreement with the Bayes-optimal decision, coverage and
    cost, each over the rows it is computed on. Example: anchor truth score runs/worlds-vanilla-s0
    """
    from anchor.rundir import RunDirectory
    from anchor.scoring.truth import run_truth_scores

    with friendly_errors():
        scores = run_truth_scores(RunDirectory(run_dir))
        if scores is None:
            raise fail(f"{run_dir}: no prediction carries a true probability (p_true); score a run of `anchor "
                       "predict` on a cases file with a p_true column, such as one from `anchor truth make --cases`")
        if json_out:
            emit_json({"run": str(run_dir), **scores.model_dump(mode="json")})
            return
        out.print("\n".join(_score_lines(str(run_dir), scores)), markup=False, highlight=False, soft_wrap=True)


def _score_lines(run: str, scores: object) -> list[str]:
    from anchor.truth.scores import TruthScores

    assert isinstance(scores, TruthScores)
    lines = [f"{run}: {scores.n} rows with a true probability; {scores.answered} answered, {scores.unknown} "
             f"unknown, {scores.failed} failed", ""]
    width = max(len(name) for name in TruthScores.FIGURES)
    for name in TruthScores.FIGURES:
        f = getattr(scores, name)
        value = "–" if f.value is None else f"{f.value:.4f}"
        tail = f"over {f.n} rows" if f.value is not None else f"({f.reason})"
        lines.append(f"  {name:<{width}}  {value:>8}  {tail}")
    lines.append(f"  {'decision_ties':<{width}}  {scores.decision_ties:>8}  (left out of decision_accuracy)")
    if scores.requests is not None:
        lines.append(f"  cost: {scores.requests:,} requests, {scores.tokens or 0:,} tokens")
    else:
        lines.append(f"  cost: – ({scores.cost_note})")
    lines += [f"  note: {n}" for n in scores.notes]
    lines.append(f"  (kl and cross_entropy in nats, estimates clipped to [{scores.clip:g}, 1 - {scores.clip:g}])")
    return lines


app.command("make")(make_command)
app.command("score")(score_command)
app.command("serve")(serve_command)
app.command("bench")(bench_command)
