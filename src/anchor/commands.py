"""``anchor build``, ``anchor infer`` and ``anchor demo``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.rule import Rule

from anchor.cli import (
    ApiKey,
    BaseUrl,
    CacheDir,
    Concurrency,
    JsonOut,
    Model,
    NoCache,
    ParseRetries,
    RichReporter,
    Seed,
    Timeout,
    app,
    emit_json,
    err,
    fail,
    friendly_errors,
    out,
    settings_from,
)
from anchor.llm.client import run_sync
from anchor.types import BuildParams, Scenario

BUILD_PANEL = "Factor space (stage 1)"
MAP_PANEL = "Mapping (stage 2)"
INFER_PANEL = "Inference (stage 3) and ablations"

ScenarioOpt = Annotated[str | None, typer.Option("--scenario", help="The scenario (may be empty for fact checking).",
                                                 rich_help_panel=BUILD_PANEL)]
Outcome1Opt = Annotated[str | None, typer.Option("--outcome1", help="Outcome O1.", rich_help_panel=BUILD_PANEL)]
Outcome2Opt = Annotated[str | None, typer.Option("--outcome2", help="The competing outcome O2.",
                                                 rich_help_panel=BUILD_PANEL)]
NTarget = Annotated[int, typer.Option("--n-target", help="Stop growing at this many factors (paper: 80; 40 for "
                                      "Today/fact checking).", rich_help_panel=BUILD_PANEL)]
BatchSize = Annotated[int, typer.Option("--batch-size", help="b: sentences generated per round (paper: 10; 5).",
                                        rich_help_panel=BUILD_PANEL)]
MaxRounds = Annotated[int, typer.Option("--max-rounds", help="T_max (paper: 20; 10).", rich_help_panel=BUILD_PANEL)]
Patience = Annotated[int, typer.Option("--patience", help="Stop after this many rounds that add nothing.",
                                       rich_help_panel=BUILD_PANEL)]
VoteSamples = Annotated[int, typer.Option("--vote-samples", help="m: self-consistency samples per factor label.",
                                          rich_help_panel=BUILD_PANEL)]
VoteBatch = Annotated[int, typer.Option("--vote-batch", help="Factors labelled per LLM call (1 = one at a time).",
                                        rich_help_panel=BUILD_PANEL)]
DedupThreshold = Annotated[float, typer.Option("--dedup-threshold", help="Cosine similarity treated as a duplicate.",
                                               rich_help_panel=BUILD_PANEL)]
NoCluster = Annotated[bool, typer.Option("--no-cluster", help="'w/o cluster' ablation: one flat factor group.",
                                         rich_help_panel=BUILD_PANEL)]
NoPrune = Annotated[bool, typer.Option("--no-prune", help="Keep redundant cluster members.",
                                       rich_help_panel=BUILD_PANEL)]


def _scenario(scenario: str | None, outcome1: str | None, outcome2: str | None) -> Scenario:
    if not outcome1 or not outcome2:
        raise fail("give --outcome1 and --outcome2 (and usually --scenario)")
    return Scenario(text=scenario or "", outcome1=outcome1, outcome2=outcome2)


def _build_params(n_target: int, batch_size: int, max_rounds: int, patience: int, vote_samples: int,
                  vote_batch: int, dedup_threshold: float, no_cluster: bool, no_prune: bool, seed: int) -> BuildParams:
    return BuildParams(n_target=n_target, batch_size=batch_size, max_rounds=max_rounds, patience=patience,
                       vote_samples=vote_samples, vote_batch_size=vote_batch, dedup_threshold=dedup_threshold,
                       borderline_threshold=min(0.75, dedup_threshold), cluster=not no_cluster,
                       prune=not no_prune, seed=seed)


@app.command()
def build(
    scenario: ScenarioOpt = None, outcome1: Outcome1Opt = None, outcome2: Outcome2Opt = None,
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Where to write the factor space (JSON).")] = Path(
        "space.json"),
    n_target: NTarget = 80, batch_size: BatchSize = 10, max_rounds: MaxRounds = 20, patience: Patience = 3,
    vote_samples: VoteSamples = 3, vote_batch: VoteBatch = 8, dedup_threshold: DedupThreshold = 0.9,
    no_cluster: NoCluster = False, no_prune: NoPrune = False,
    json_out: JsonOut = False,
    base_url: BaseUrl = None, model: Model = None, api_key: ApiKey = None, no_cache: NoCache = False,
    cache_dir: CacheDir = None, seed: Seed = 0, timeout: Timeout = None, concurrency: Concurrency = None,
    parse_retries: ParseRetries = 20,
) -> None:
    """Build a scenario's hierarchical factor space (stage 1) and save it as JSON.

    Example: anchor build --scenario "Cooking noodles in hot vs warm water." --outcome1 "Hot water
    is more efficient." --outcome2 "Warm water is more efficient." --out noodles.json
    """
    from anchor.pipeline import Anchor, AnchorConfig
    from anchor.render import space_view
    from anchor.space.io import save_space

    with friendly_errors():
        scen = _scenario(scenario, outcome1, outcome2)
        params = _build_params(n_target, batch_size, max_rounds, patience, vote_samples, vote_batch,
                               dedup_threshold, no_cluster, no_prune, seed)
        settings = settings_from(base_url, model, api_key, no_cache, cache_dir, seed, timeout, concurrency,
                                 parse_retries)
        engine = Anchor(settings=settings, config=AnchorConfig(build=params))
        with RichReporter() as report:
            space = run_sync(engine.abuild(scen, report), engine.client)
        save_space(space, out_path)
        if json_out:
            emit_json(json.loads(space.model_dump_json(exclude={"embeddings"})) | {"path": str(out_path)})
        else:
            out.print(space_view(space))
            out.print(f"[bold]saved[/bold] {out_path}")


# --------------------------------------------------------------------------- infer


def read_conditions(conditions: list[str], path: Path | None) -> list[str]:
    """``--condition`` values plus a file: one condition per line, or JSON Lines with a
    'condition' (or 'text') field. Blank lines and lines starting with '#' are skipped."""
    found = list(conditions)
    if path is not None:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise fail(f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise fail(f"{path} is not a UTF-8 text file") from None
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise fail(f"{path}, line {n}: not valid JSON ({exc.msg})") from None
                text = obj.get("condition", obj.get("text")) if isinstance(obj, dict) else None
                if not isinstance(text, str) or not text.strip():
                    raise fail(f"{path}, line {n}: JSON line needs a non-empty 'condition' string")
                found.append(text)
            else:
                found.append(line)
    found = [c for c in (" ".join(c.split()) for c in found) if c]
    if not found:
        raise fail("no condition given: use --condition TEXT (repeatable) or --conditions-file FILE")
    return found


@app.command()
def infer(
    space_path: Annotated[Path | None, typer.Option("--space", help="A factor space built by `anchor build`.")] = None,
    condition: Annotated[list[str] | None, typer.Option("--condition", "-c", help="A condition (repeatable).")] = None,
    conditions_file: Annotated[Path | None, typer.Option("--conditions-file", help="One condition per line, or JSONL "
                                                         "with a 'condition' field.")] = None,
    scenario: ScenarioOpt = None, outcome1: Outcome1Opt = None, outcome2: Outcome2Opt = None,
    save_space_to: Annotated[Path | None, typer.Option("--save-space", help="When building first, also save the "
                                                       "space here.", rich_help_panel=BUILD_PANEL)] = None,
    n_target: NTarget = 80, batch_size: BatchSize = 10, max_rounds: MaxRounds = 20, patience: Patience = 3,
    vote_samples: VoteSamples = 3, vote_batch: VoteBatch = 8, dedup_threshold: DedupThreshold = 0.9,
    no_cluster: NoCluster = False, no_prune: NoPrune = False,
    k1: Annotated[int, typer.Option("--k1", help="Clusters kept by the coarse search.", rich_help_panel=MAP_PANEL)] = 3,
    k2: Annotated[int, typer.Option("--k2", help="Factors per cluster (and unclustered).",
                                    rich_help_panel=MAP_PANEL)] = 5,
    alpha: Annotated[float, typer.Option("--alpha", help="Theme weight in cluster prototypes.",
                                         rich_help_panel=MAP_PANEL)] = 0.5,
    rounds: Annotated[int, typer.Option("--rounds", help="R: LLM selections that vote.",
                                        rich_help_panel=MAP_PANEL)] = 3,
    vote_ratio: Annotated[float, typer.Option("--vote-ratio", help="Keep factors with votes >= ceil(ratio*R).",
                                              rich_help_panel=MAP_PANEL)] = 0.5,
    no_reflection: Annotated[bool, typer.Option("--no-reflection", help="Skip the reflection pass.",
                                                rich_help_panel=MAP_PANEL)] = False,
    no_hierarchy: Annotated[bool, typer.Option("--no-hierarchy", help="'w/o hierarchy': flat KNN, same budget.",
                                               rich_help_panel=MAP_PANEL)] = False,
    no_cbn: Annotated[bool, typer.Option("--no-cbn", help="'w/o cbn': Naive Bayes only.",
                                         rich_help_panel=INFER_PANEL)] = False,
    no_nb: Annotated[bool, typer.Option("--no-nb", help="'w/o nb': latent CBN only.", rich_help_panel=INFER_PANEL)] = False,
    no_pe_llm: Annotated[bool, typer.Option("--no-pe-llm", help="'w/o pe-llm': parameters from voting labels.",
                                            rich_help_panel=INFER_PANEL)] = False,
    bma: Annotated[bool, typer.Option("--bma", help="Bayesian model averaging instead of LOP.",
                                      rich_help_panel=INFER_PANEL)] = False,
    w_nb: Annotated[float, typer.Option("--w-nb", help="LOP weight of Naive Bayes.", rich_help_panel=INFER_PANEL)] = 0.5,
    w_cbn: Annotated[float, typer.Option("--w-cbn", help="LOP weight of the CBN.", rich_help_panel=INFER_PANEL)] = 0.5,
    tau: Annotated[float, typer.Option("--tau", help="Unknown when max posterior < tau.",
                                       rich_help_panel=INFER_PANEL)] = 0.0,
    json_out: JsonOut = False,
    base_url: BaseUrl = None, model: Model = None, api_key: ApiKey = None, no_cache: NoCache = False,
    cache_dir: CacheDir = None, seed: Seed = 0, timeout: Timeout = None, concurrency: Concurrency = None,
    parse_retries: ParseRetries = 20,
) -> None:
    """Estimate P(O1 | S, u) and P(O2 | S, u) for conditions u, with a full audit trail.

    Uses a stored space (--space) or builds one first (--scenario/--outcome1/--outcome2).
    Example: anchor infer --space noodles.json -c "You are at a high altitude." --json
    """
    from anchor.inference.engine import InferenceConfig
    from anchor.mapping.mapper import MappingConfig
    from anchor.pipeline import Anchor, AnchorConfig
    from anchor.render import result_view, space_view
    from anchor.space.io import load_space, save_space
    from anchor.types import AggregationMethod

    with friendly_errors():
        conds = read_conditions(condition or [], conditions_file)
        if space_path is not None and (scenario or outcome1 or outcome2):
            raise fail("give either --space or --scenario/--outcome1/--outcome2, not both")
        space = load_space(space_path) if space_path is not None else None
        scen = None if space is not None else _scenario(scenario, outcome1, outcome2)
        config = AnchorConfig(
            build=_build_params(n_target, batch_size, max_rounds, patience, vote_samples, vote_batch,
                                dedup_threshold, no_cluster, no_prune, seed),
            mapping=MappingConfig(k1=k1, k2=k2, alpha=alpha, rounds=rounds, vote_ratio=vote_ratio,
                                  reflection=not no_reflection, hierarchical=not no_hierarchy),
            inference=InferenceConfig(llm_parameters=not no_pe_llm, use_nb=not no_nb, use_cbn=not no_cbn,
                                      aggregation=AggregationMethod.BMA if bma else AggregationMethod.LOP,
                                      w_nb=w_nb, w_cbn=w_cbn, tau=tau),
        )
        settings = settings_from(base_url, model, api_key, no_cache, cache_dir, seed, timeout, concurrency,
                                 parse_retries)
        engine = Anchor(settings=settings, config=config)

        async def work():
            nonlocal space
            with RichReporter() as report:
                if space is None:
                    space = await engine.abuild(scen, report)
                    if save_space_to is not None:
                        save_space(space, save_space_to)
                return await engine.ainfer(space, conds, report)

        results = run_sync(work(), engine.client)
        if json_out:
            for res in results:
                emit_json(result_json(res))
        else:
            if space_path is None:
                out.print(space_view(space))
            for res in results:
                out.print(result_view(res, space))


def result_json(result) -> dict:  # noqa: ANN001
    """The per-condition JSON object (the documented keys first)."""
    data = result.model_dump(mode="json")
    factors = [{"text": f["text"], "phi": f["phi"], "theme": f["theme"], "label": f["label"], "id": f["factor_id"],
                "phi_raw": f["phi_raw"]} for f in data["factors"]]
    return {
        "condition": data["condition"],
        "p_outcome1": data["p_outcome1"],
        "p_outcome2": data["p_outcome2"],
        "unknown": data["unknown"],
        "unknown_reason": data["unknown_reason"],
        "factors": factors,
        "nb": data["nb"],
        "cbn": data["cbn"],
        "latents": data["latents"],
        "latent_repairs": data["latent_repairs"],
        "aggregation": data["aggregation"],
        "weights": data["weights"],
        "variant": data["variant"],
        "mapping": data["mapping"],
        "cost": data["cost"],
        "compute_seconds": data["compute_seconds"],
    }


# --------------------------------------------------------------------------- demo

NOODLES = Scenario(
    text="The efficiency of cooking noodles is being compared between hot water and warm water.",
    outcome1="Noodles cook much more efficiently in hot water than they do in warm water.",
    outcome2="Noodles cook much more efficiently in warm water than they do in hot water.",
)
NOODLE_CONDITIONS = [
    "The higher temperature of hot water can accelerate the gelatinization process in starchy foods like noodles.",
    "Cooking in hot water reduces the amount of total time that the noodles spend in the water.",
    "Hot water helps in killing any potential foodborne pathogens or microbes present in the noodles.",
    "You're cooking a large quantity of noodles.",
    "You are at a high altitude where water boils at lower temperatures than at sea level.",
]
#: Small enough for the embedded 135M model on two cores to finish in a few minutes.
DEMO_BUILD = dict(n_target=24, batch_size=5, max_rounds=6, patience=3, vote_samples=3, vote_batch=8)


@app.command()
def demo(
    full: Annotated[bool, typer.Option("--full", help="Use the paper's build sizes (80 factors, b=10, 20 rounds) "
                                       "instead of the quick demo sizes.")] = False,
    out_path: Annotated[Path | None, typer.Option("--out", "-o", help="Also save the factor space here.")] = None,
    json_out: JsonOut = False,
    base_url: BaseUrl = None, model: Model = None, api_key: ApiKey = None, no_cache: NoCache = False,
    cache_dir: CacheDir = None, seed: Seed = 0, timeout: Timeout = None, concurrency: Concurrency = None,
    parse_retries: ParseRetries = 20,
) -> None:
    """The paper's noodles case study end to end: build the factor space, then answer the five conditions of its mapping table, explaining each answer.

    Runs on the embedded model by default; point it at a server for meaningful numbers (a 135M
    model shows that the pipeline works, not what the method can do).
    """
    from anchor.llm.ledger import merge_costs
    from anchor.pipeline import Anchor, AnchorConfig
    from anchor.render import cost_table, result_view, space_view
    from anchor.space.io import save_space

    with friendly_errors():
        sizes = dict(n_target=80, batch_size=10, max_rounds=20, patience=3, vote_samples=3, vote_batch=8) if full \
            else DEMO_BUILD
        params = _build_params(**sizes, dedup_threshold=0.9, no_cluster=False, no_prune=False, seed=seed)
        settings = settings_from(base_url, model, api_key, no_cache, cache_dir, seed, timeout, concurrency,
                                 parse_retries)
        started = time.perf_counter()
        engine = Anchor(settings=settings, config=AnchorConfig(build=params))
        if not json_out:
            err.print(Rule("ANCHOR demo: cooking noodles in hot vs warm water"))
            err.print(f"LLM: {'server ' + str(settings.base_url) if settings.uses_server else 'embedded SmolLM2-135M'}"
                      f"; build sizes: {sizes}")

        async def work():
            with RichReporter(enabled=True) as report:
                space = await engine.abuild(NOODLES, report)
                results = await engine.ainfer(space, NOODLE_CONDITIONS, report)
            return space, results

        space, results = run_sync(work(), engine.client)
        wall = time.perf_counter() - started
        if out_path is not None:
            save_space(space, out_path)
        all_costs = list(space.cost) + [c for r in results for c in r.cost]
        llm_seconds = sum(c.llm_seconds for c in all_costs)
        timing = {"wall_seconds": round(wall, 2), "llm_seconds": round(llm_seconds, 2),
                  "compute_seconds": round(max(0.0, wall - llm_seconds), 2)}
        if json_out:
            emit_json({"space": json.loads(space.model_dump_json(exclude={"embeddings"})),
                       "results": [result_json(r) for r in results], "timing": timing})
            return
        out.print(Rule("Stage 1: factor space"))
        out.print(space_view(space))
        out.print(Rule("Stages 2 and 3: the five conditions"))
        for res in results:
            out.print(result_view(res, space))
        out.print(Rule("Cost"))
        out.print(cost_table(merge_costs(all_costs), title="LLM cost per stage (build + 5 conditions)"))
        out.print(f"wall time {wall:.1f} s = LLM {llm_seconds:.1f} s + compute and model loading "
                  f"{timing['compute_seconds']:.1f} s")
        if not settings.uses_server:
            out.print("[bright_black]These numbers come from a 135M-parameter model: they show the pipeline "
                      "working offline, not the method's accuracy. Use --base-url for a real model.[/bright_black]")
