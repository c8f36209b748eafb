"""``anchor explain`` and the HTML index that ``anchor report`` writes: the audit views on the
command line.

``anchor explain`` answers conditions like ``anchor infer`` (same option groups, same knobs) and
writes one self-contained HTML page instead of a terminal panel; without a condition it writes the
factor-space page. The run index of an evaluation directory is written by
:func:`write_html_indexes`, which ``anchor report`` calls.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from anchor.cli.build import JsonOut, build_and_infer, read_conditions, save_or_rescue, space_source
from anchor.cli.console import emit_json, fail, friendly_errors, out
from anchor.cli.options import (
    FLAG_NAMES,
    BuildOptions,
    CacheOptions,
    ConnectionOptions,
    InferenceOptions,
    MappingOptions,
    ScenarioOptions,
    SeedOption,
    expand_options,
)
from anchor.files import DestinationError, PageWriteError, check_destination, write_text_atomic
from anchor.types import InferenceResult

# The machinery a command drives is imported inside the command, to keep start-up light: see anchor.cli.

PAGE_PANEL = "Page"


def human_size(n_bytes: int) -> str:
    """``812 B``, ``23.4 kB``, ``1.20 MB`` (decimal units, as file managers show them)."""
    if n_bytes < 1000:
        return f"{n_bytes} B"
    if n_bytes < 1_000_000:
        return f"{n_bytes / 1000:.1f} kB"
    return f"{n_bytes / 1_000_000:.2f} MB"


def write_page_or_rescue(html_text: str, path: Path) -> Path:
    """Write the page at ``path``; if that fails after the LLM work is done, write it into a
    temporary folder instead and say where, so the answers that were paid for are not lost."""
    try:
        return write_text_atomic(path, html_text)
    except PageWriteError as exc:
        rescue = Path(tempfile.mkdtemp(prefix="anchor-rescued-")) / (path.name or "explain.html")
        write_text_atomic(rescue, html_text)
        reason = getattr(exc.__cause__, "strerror", None) or str(exc)
        raise DestinationError(f"--out {path}: cannot write ({reason}); the page was saved to {rescue} "
                               "instead") from exc


def _condition_summary(result: InferenceResult) -> dict[str, Any]:
    return {"condition": result.condition, "p_outcome1": result.p_outcome1, "p_outcome2": result.p_outcome2,
            "unknown": result.unknown, "unknown_reason": result.unknown_reason, "nb": result.nb,
            "cbn": result.cbn, "weights": result.weights, "n_factors": len(result.factors)}


@expand_options
def explain(
    space_path: Annotated[Path | None, typer.Option("--space", help="A factor space built by `anchor build`.")] = None,
    condition: Annotated[list[str] | None, typer.Option("--condition", "-c", help=(
        "A condition to answer and explain (repeatable). Without any, the page shows the factor space "
        "alone."))] = None,
    conditions_file: Annotated[Path | None, typer.Option("--conditions-file", help="One condition per line, or JSONL "
                                                         "with a 'condition' field.")] = None,
    out_path: Annotated[Path, typer.Option("--out", "-o", help="Where to write the HTML page.",
                                           rich_help_panel=PAGE_PANEL)] = Path("explain.html"),
    title: Annotated[str | None, typer.Option("--title", help="Heading of the page (default: 'ANCHOR explanation', "
                                              "or 'ANCHOR factor space' for the space alone).",
                                              rich_help_panel=PAGE_PANEL)] = None,
    scen: ScenarioOptions = None,  # type: ignore[assignment]
    save_space_to: Annotated[Path | None, typer.Option("--save-space", help="When building first, also save the "
                                                       "space here.", rich_help_panel="Factor space (stage 1)")] = None,
    sizes: BuildOptions = None,  # type: ignore[assignment]
    mapping: MappingOptions = None,  # type: ignore[assignment]
    inference: InferenceOptions = None,  # type: ignore[assignment]
    json_out: JsonOut = False,
    conn: ConnectionOptions = None,  # type: ignore[assignment]
    cache: CacheOptions = None,  # type: ignore[assignment]
    seed: SeedOption = None,  # type: ignore[assignment]
) -> None:
    """Write one self-contained HTML page explaining each answer: retrieval funnel, φ per factor, the latent network, posteriors, LLM cost.

    The page opens from disk in any browser: no CDN, no fonts, nothing fetched, no script.

    Uses a stored space (--space) or builds one first (--scenario/--outcome1/--outcome2); every knob of `anchor infer` applies.

    Without --condition the page shows the factor space alone: themes, votes, pruned factors, a 2-D map, clustering statistics and build cost.

    Example: anchor explain --space noodles.json -c "You are at a high altitude." --out noodles.html
    """
    from anchor.audit.pages import explain_html, space_html

    with friendly_errors(FLAG_NAMES):
        conds = read_conditions(condition or [], conditions_file) if condition or conditions_file else []
        if space_path is None and not scen.given():
            raise fail("give --space FILE, or --scenario/--outcome1/--outcome2 to build the factor space first")
        space, scenario = space_source(space_path, scen, save_space_to)
        # Every destination is checked before the first request.
        if out_path.is_dir():
            raise fail(f"--out {out_path}: is a directory; give a file name such as {out_path / 'explain.html'}")
        check_destination(out_path, "--out")
        if save_space_to is not None:
            check_destination(save_space_to, "--save-space")
        if save_space_to is not None and save_space_to.resolve() == out_path.resolve():
            raise fail("--save-space and --out name the same file")

        results: list[InferenceResult] = []
        if space is None or conds:
            space, results = build_and_infer(space, scenario, conds, sizes=sizes, mapping=mapping,
                                             inference=inference, conn=conn, cache=cache, seed=seed,
                                             progress=not json_out)
        assert space is not None

        if results:
            html_text = explain_html(space, results, title=title)
        else:
            html_text = space_html(space, title=title)
        # The space first: a page that cannot be written must not cost the space that was paid for.
        if save_space_to is not None:
            save_or_rescue(space, save_space_to, "--save-space")
        written = write_page_or_rescue(html_text, out_path)
        size = written.stat().st_size
        if json_out:
            emit_json({"path": str(written), "bytes": size, "page": "explanation" if results else "space",
                       "scenario": space.scenario.model_dump(mode="json"), "n_factors": len(space.factors),
                       "space_saved_to": str(save_space_to) if save_space_to is not None else None,
                       "conditions": [_condition_summary(r) for r in results]}, "explain")
            return
        what = (f"explanation of {len(results)} condition(s)" if results
                else f"factor space ({len(space.factors)} factors)")
        for r in results:
            answer = "unknown" if r.unknown else f"P(O1) = {r.p_outcome1:.3f}, P(O2) = {r.p_outcome2:.3f}"
            out.print(f"  {answer}  [bright_black]{_short(r.condition)}[/bright_black]", highlight=False,
                      soft_wrap=True)
        if save_space_to is not None:
            out.print(f"[bold]saved[/bold] {escape(str(save_space_to))}", highlight=False, soft_wrap=True)
        out.print(f"[bold]wrote[/bold] {escape(str(written))} ({human_size(size)}; {what}); open it in a browser",
                  highlight=False, soft_wrap=True)


def _short(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    return escape(text if len(text) <= limit else text[: limit - 1] + "…")


# --------------------------------------------------------------------------- anchor report


def write_html_indexes(run_dirs: Sequence[Path]) -> list[Any]:
    """Write the HTML index (``DIR/index.html`` and ``DIR/explain/``) of every run directory and
    return what was written for each (:class:`anchor.evaluation.report.RunIndexResult`)."""
    from anchor.evaluation.report.run_index import write_run_index

    return [write_run_index(d) for d in run_dirs]


def index_summary(result: Any) -> str:
    """One line per index: where it is, how many rows and pages, and its size."""
    size = result.index.stat().st_size
    counts = {s: sum(1 for r in result.rows if r.status == s) for s in ("correct", "wrong", "unknown")}
    return (f"wrote {result.index} ({human_size(size)}; {len(result.rows)} row(s): {counts['correct']} correct, "
            f"{counts['wrong']} wrong, {counts['unknown']} unknown; {len(result.pages)} explanation page(s))")
