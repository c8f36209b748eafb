"""``anchor truth serve``: the simulated LLM of a world file as an OpenAI-compatible server.

A function of its own, registered by the ``truth`` command group (:mod:`anchor.cli.truth`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from anchor.cli.console import err, friendly_errors, out

SERVE_HELP_ERRORS = (
    "A JSON file of error parameters (some or all of: factor_recall, hallucination_rate, vote_flip_rate, "
    "map_recall, map_false_rate, reflect_catch, factor_curve, direct_curve, phi_reading, grouping_error; the "
    "rest keep their defaults). See docs/known-truth.md.")


def serve_command(
    worlds: Annotated[Path, typer.Option("--worlds", help="The world file whose truth the LLM answers from "
                                                           "(written by `anchor truth make`).")],
    errors: Annotated[Path | None, typer.Option("--errors", help=SERVE_HELP_ERRORS)] = None,
    zero: Annotated[bool, typer.Option("--zero", help="Start from no error at all (the oracle) instead of "
                                                      "the defaults; --errors and --set apply on top.")] = False,
    settings: Annotated[list[str] | None, typer.Option(
        "--set", metavar="NAME=VALUE", help="One error parameter, NAME=VALUE (repeatable), applied last: --set factor_recall=0.5 "
                      "--set direct_curve.noise=0.8 --set phi_reading=latent-link.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="The simulator's seed: another seed, other draws.")] = 0,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: a free one).")] = 8000,
) -> None:
    """Serve the simulated LLM of a world file over the OpenAI chat API, until interrupted.

    Point any OpenAI-compatible client at the printed base URL, e.g. `anchor predict` with --base-url:
    it answers every prompt anchor sends (ANCHOR, its ablations, the baselines, BIRD) from the worlds'
    truth, with the stated errors, exactly as the in-process simulator does.

    Example: anchor truth serve --worlds worlds.json --set direct_curve.noise=0.8 --port 8011
    """
    from anchor.truth.simulate.errors import SimErrors, errors_with_settings, load_errors
    from anchor.truth.simulate.llm import SimulatedLLM
    from anchor.truth.simulate.server import SimServer
    from anchor.truth.world import load_worlds

    with friendly_errors({"worlds": "--worlds", "errors": "--errors", "seed": "--seed", "port": "--port"}):
        file = load_worlds(worlds)
        base = SimErrors.zero() if zero else SimErrors()
        chosen = load_errors(str(errors), base) if errors is not None else base
        chosen = errors_with_settings(chosen, list(settings or []))
        llm = SimulatedLLM(file, chosen, seed=seed)
        try:
            server = SimServer(llm, host=host, port=port)
        except OSError as exc:
            raise OSError(f"--port {port}: cannot listen on {host}:{port} ({exc.strerror or exc})") from None
        out.print(f"serving {llm.model} ({len(file.worlds)} world(s) of {worlds}) at {server.base_url}",
                  highlight=False, soft_wrap=True)
        err.print(f"errors: {chosen.model_dump_json()}", highlight=False, soft_wrap=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.stop()
