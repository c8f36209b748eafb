"""``anchor build``, ``anchor infer`` and ``anchor demo``: the method itself on one scenario."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.rule import Rule

from anchor.calibration.contract import CalibratorMismatchWarning
from anchor.calibration.registry import FileCalibrator, read_calibrator
from anchor.cli.console import (
    RichReporter,
    emit_json,
    err,
    fail,
    friendly_errors,
    llm_activity,
    one_line_warnings,
    out,
)
from anchor.cli.options import (
    FLAG_NAMES,
    BuildOptions,
    CacheOptions,
    CalibratorOption,
    ConnectionOptions,
    InferenceOptions,
    MappingOptions,
    ScenarioOptions,
    SeedOption,
    expand_options,
    llm_settings,
)
from anchor.cli.render import cost_table, result_view, space_view
from anchor.demo import NOODLE_CONDITIONS, NOODLES
from anchor.files import DestinationError, check_destination
from anchor.llm.ledger import merge_costs
from anchor.llm.sync import run_sync
from anchor.settings.inference import USER_RULE, InferenceConfig
from anchor.settings.space import BuildParams
from anchor.space.io import load_space, save_space
from anchor.types import FactorSpace, InferenceResult

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.

JsonOut = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout instead of the readable view.")]


def save_or_rescue(space: FactorSpace, path: Path, what: str) -> Path:
    """Save the space at ``path``; if that fails after the work is done, save it in a temporary
    folder instead and say where, so no paid-for result is lost."""
    try:
        return save_space(space, path)
    except OSError as exc:
        rescue = Path(tempfile.mkdtemp(prefix="anchor-rescued-")) / (path.name or "space.json")
        save_space(space, rescue)
        raise DestinationError(f"{what} {path}: cannot write ({exc.strerror or exc}); the space was saved to "
                               f"{rescue} instead") from exc


# --------------------------------------------------------------------------- build


@expand_options
def build(
    scen: ScenarioOptions,
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Where to write the factor space (JSON).")] = Path(
        "space.json"),
    sizes: BuildOptions = None,  # type: ignore[assignment]
    json_out: JsonOut = False,
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
) -> None:
    """Build a scenario's hierarchical factor space (stage 1) and save it as JSON.

    Example: anchor build --scenario "Cooking noodles in hot vs warm water." --outcome1 "Hot water
    is more efficient." --outcome2 "Warm water is more efficient." --out noodles.json
    """
    from anchor.config import AnchorConfig
    from anchor.pipeline import Anchor

    with friendly_errors(FLAG_NAMES):
        scenario = scen.build()
        check_destination(out_path, "--out")
        settings = llm_settings(conn, cache, seed)
        params = sizes.params(seed=settings.seed)
        # The space stores the scenario's base rate for the rule infer and predict answer with by default.
        engine = Anchor(settings=settings, config=AnchorConfig(build=params, inference=InferenceConfig(rule=USER_RULE)))
        with RichReporter() as report, llm_activity(engine.client.ledger, report):
            space = run_sync(engine.abuild(scenario, report), engine.client)
        save_or_rescue(space, out_path, "--out")
        if json_out:
            emit_json(json.loads(space.model_dump_json(exclude={"embeddings"})) | {"path": str(out_path)})
        else:
            out.print(space_view(space))
            out.print(f"[bold]saved[/bold] {out_path}")


# --------------------------------------------------------------------------- infer


def read_conditions(conditions: list[str], path: Path | None) -> list[str]:
    """``--condition`` values plus a file: one condition per line, or JSON Lines with a
    'condition' (or 'text') field. Blank lines and lines starting with '#' are skipped. The file is
    read by the rules of every cases file (:mod:`anchor.jsonl`): UTF-8 with or without a byte-order
    mark, lines of at most a row's size, JSON lines flat enough and without a key given twice."""
    found = list(conditions)
    if path is not None:
        found += _conditions_in(path)
    found = [c for c in (" ".join(c.split()) for c in found) if c]
    if not found:
        raise fail("no condition given: use --condition TEXT (repeatable) or --conditions-file FILE")
    return found


def _conditions_in(path: Path) -> list[str]:
    from anchor import jsonl
    from anchor.cases.model import MAX_ROW_BYTES

    found: list[str] = []
    try:
        with open(path, "rb") as stream:
            for n, raw in enumerate(jsonl.bounded_lines(stream, MAX_ROW_BYTES), 1):
                if isinstance(raw, jsonl.LongLine):
                    raise fail(f"{path}, line {n}: {jsonl.too_long(raw.size, MAX_ROW_BYTES)}")
                if n == 1:
                    jsonl.check_encoding(raw, str(path), fail)
                    raw = raw.removeprefix(jsonl.UTF8_BOM)
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError:
                    raise fail(f"{path}, line {n}: not valid UTF-8 text") from None
                if line and not line.startswith("#"):
                    found.append(_condition_of(line, path, n))
    except OSError as exc:
        raise fail(f"cannot read {path}: {exc.strerror or exc}") from None
    return found


def _condition_of(line: str, path: Path, n: int) -> str:
    """A line's condition: the line itself, or a JSON line's 'condition' (or 'text') field."""
    from anchor import jsonl

    if not line.startswith("{"):
        return line
    obj, problem = jsonl.decode_line(line)
    if problem is not None:
        raise fail(f"{path}, line {n}: {problem}")
    text = obj.get("condition", obj.get("text")) if isinstance(obj, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise fail(f"{path}, line {n}: JSON line needs a non-empty 'condition' string")
    return text


def space_source(space_path: Path | None, scen: ScenarioOptions,
                 save_space_to: Path | None) -> tuple[FactorSpace | None, Any]:
    """(the stored space, None) for --space, or (None, the scenario) to build one first; the two
    forms and --save-space checked against each other."""
    if space_path is not None and scen.given():
        raise fail("give either --space or --scenario/--outcome1/--outcome2, not both")
    if space_path is not None and save_space_to is not None:
        raise fail("--save-space only applies when building first (--scenario/--outcome1/--outcome2)")
    space = load_space(space_path) if space_path is not None else None
    return space, (None if space is not None else scen.build())


def build_and_infer(
    space: FactorSpace | None, scenario: Any, conds: list[str], *, sizes: BuildOptions, mapping: MappingOptions,
    inference: InferenceOptions, conn: ConnectionOptions, cache: CacheOptions, seed: int | None,
    progress: bool = True, calibrator: FileCalibrator | None = None,
) -> tuple[FactorSpace, list[InferenceResult]]:
    """Build the space for ``scenario`` when none is given, then answer ``conds`` on it (with the
    live progress panel unless ``progress`` is False), calibrating each answer with ``calibrator``."""
    from anchor.config import AnchorConfig
    from anchor.pipeline import Anchor

    settings = llm_settings(conn, cache, seed)
    config = AnchorConfig(build=sizes.params(seed=settings.seed), mapping=mapping.config(),
                          inference=inference.config(USER_RULE))
    engine = Anchor(settings=settings, config=config, calibrator=calibrator)

    async def work() -> tuple[FactorSpace, list[InferenceResult]]:
        built = space
        with RichReporter(enabled=progress) as report, llm_activity(engine.client.ledger, report):
            if built is None:
                built = await engine.abuild(scenario, report)
            return built, (await engine.ainfer(built, conds, report) if conds else [])

    return run_sync(work(), engine.client)


@expand_options
def infer(
    space_path: Annotated[Path | None, typer.Option("--space", help="A factor space built by `anchor build`.")] = None,
    condition: Annotated[list[str] | None, typer.Option("--condition", "-c", help="A condition (repeatable).")] = None,
    conditions_file: Annotated[Path | None, typer.Option("--conditions-file", help="One condition per line, or JSONL "
                                                         "with a 'condition' field.")] = None,
    scen: ScenarioOptions = None,  # type: ignore[assignment]
    save_space_to: Annotated[Path | None, typer.Option("--save-space", help="When building first, also save the "
                                                       "space here.", rich_help_panel="Factor space (stage 1)")] = None,
    sizes: BuildOptions = None,  # type: ignore[assignment]
    mapping: MappingOptions = None,  # type: ignore[assignment]
    inference: InferenceOptions = None,  # type: ignore[assignment]
    calibrator_path: CalibratorOption = None,
    json_out: JsonOut = False,
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
) -> None:
    """Estimate P(O1 | S, u) and P(O2 | S, u) for conditions u, with a full audit trail.

    Uses a stored space (--space) or builds one first (--scenario/--outcome1/--outcome2).
    With --calibrator, shows the calibrated and the raw P(O1).
    Example: anchor infer --space noodles.json -c "You are at a high altitude." --json
    """
    with friendly_errors(FLAG_NAMES), one_line_warnings(CalibratorMismatchWarning):
        conds = read_conditions(condition or [], conditions_file)
        calibrator = read_calibrator(calibrator_path) if calibrator_path is not None else None
        space, scenario = space_source(space_path, scen, save_space_to)
        if save_space_to is not None:
            check_destination(save_space_to, "--save-space")
        space, results = build_and_infer(space, scenario, conds, sizes=sizes, mapping=mapping, inference=inference,
                                         conn=conn, cache=cache, seed=seed, calibrator=calibrator)
        # Print first: a bad --save-space must not cost the answers that were paid for.
        if json_out:
            for res in results:
                emit_json(result_json(res), "infer")
        else:
            if space_path is None:
                out.print(space_view(space))
            for res in results:
                out.print(result_view(res, space))
        if save_space_to is not None:
            save_or_rescue(space, save_space_to, "--save-space")


def result_json(result: InferenceResult) -> dict[str, Any]:
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
        "calibration": data["calibration"],
        "factors": factors,
        "nb": data["nb"],
        "cbn": data["cbn"],
        "latents": data["latents"],
        "latent_repairs": data["latent_repairs"],
        "aggregation": data["aggregation"],
        "weights": data["weights"],
        "rule": data["rule"],
        "base_rate": data["base_rate"],
        "variant": data["variant"],
        "mapping": data["mapping"],
        "cost": data["cost"],
        "compute_seconds": data["compute_seconds"],
    }


# --------------------------------------------------------------------------- demo

#: Small enough for the embedded 135M model on two cores to finish in a few minutes.
DEMO_BUILD = dict(n_target=24, batch_size=5, max_rounds=6, patience=3, vote_samples=3, vote_batch_size=8)


@expand_options
def demo(
    full: Annotated[bool, typer.Option("--full", help="Use the paper's build sizes (80 factors, b=10, 20 rounds) "
                                       "instead of the quick demo sizes; --n-target etc. override either.")] = False,
    out_path: Annotated[Path | None, typer.Option("--out", "-o", help="Also save the factor space here.")] = None,
    json_out: JsonOut = False,
    sizes: BuildOptions = None,  # type: ignore[assignment]
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
) -> None:
    """A worked example end to end: build a factor space (noodles in hot or warm water), answer five conditions.

    Each answer comes with its explanation.
    Runs on the embedded model by default; point it at a server for meaningful numbers (a 135M
    model shows that the pipeline works, not what the method can do).
    """
    from anchor.config import AnchorConfig
    from anchor.pipeline import Anchor

    with friendly_errors(FLAG_NAMES):
        if out_path is not None:
            check_destination(out_path, "--out")
        settings = llm_settings(conn, cache, seed)
        params = sizes.params(BuildParams() if full else BuildParams(**DEMO_BUILD), seed=settings.seed)
        started = time.perf_counter()
        engine = Anchor(settings=settings, config=AnchorConfig(build=params))
        if not json_out:
            err.print(Rule("ANCHOR demo: cooking noodles in hot vs warm water"))
            err.print(f"LLM: {'server ' + str(settings.shown_base_url) if settings.uses_server else 'embedded SmolLM2-135M'}"
                      f"; build sizes: n_target={params.n_target}, b={params.batch_size}, "
                      f"max_rounds={params.max_rounds}")

        async def work() -> tuple[FactorSpace, list[InferenceResult]]:
            with RichReporter(enabled=True) as report, llm_activity(engine.client.ledger, report):
                space = await engine.abuild(NOODLES, report)
                results = await engine.ainfer(space, NOODLE_CONDITIONS, report)
            return space, results

        space, results = run_sync(work(), engine.client)
        wall = time.perf_counter() - started
        all_costs = list(space.cost) + [c for r in results for c in r.cost]
        llm_seconds = sum(c.llm_seconds for c in all_costs)
        timing = {"wall_seconds": round(wall, 2), "llm_request_seconds": round(llm_seconds, 2)}
        if json_out:
            emit_json({"space": json.loads(space.model_dump_json(exclude={"embeddings"})),
                       "results": [result_json(r) for r in results], "timing": timing}, "demo")
        else:
            out.print(Rule("Stage 1: factor space"))
            out.print(space_view(space))
            out.print(Rule("Stages 2 and 3: the five conditions"))
            for res in results:
                out.print(result_view(res, space))
            out.print(Rule("Cost"))
            out.print(cost_table(merge_costs(all_costs), title="LLM cost per stage (build + 5 conditions)"))
            out.print(f"wall time {wall:.1f} s; LLM requests took {llm_seconds:.1f} s summed over requests "
                      "(they overlap when several run at once)")
            if not settings.uses_server:
                out.print("[bright_black]These numbers come from a 135M-parameter model: they show the pipeline "
                          "working offline, not the method's accuracy. Use --base-url for a real model.[/bright_black]")
        if out_path is not None:
            save_or_rescue(space, out_path, "--out")
