"""The ``anchor`` command line."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from anchor.llm.client import run_sync
from anchor.llm.errors import AnchorError
from anchor.llm.settings import LLMSettings
from anchor.progress import ProgressEvent, Reporter

T = TypeVar("T")

err = Console(stderr=True)
out = Console()

app = typer.Typer(
    name="anchor",
    help=(
        "Calibrated, auditable probabilities for two competing outcomes from an LLM's judgments "
        "(the ANCHOR method: factor spaces, hierarchical mapping, Naive Bayes + latent causal BN).\n\n"
        "By default the embedded SmolLM2-135M model runs in-process (no network). Point anchor at any "
        "OpenAI-compatible server with --base-url/--model/--api-key or ANCHOR_LLM_BASE_URL, "
        "ANCHOR_LLM_MODEL, ANCHOR_LLM_API_KEY."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
)
llm_app = typer.Typer(help="Check the configured LLM backend.", no_args_is_help=True)
cache_app = typer.Typer(help="Inspect or clear the response cache.", no_args_is_help=True)
app.add_typer(llm_app, name="llm")
app.add_typer(cache_app, name="cache")

# --------------------------------------------------------------------------- shared options

LLM_PANEL = "LLM backend"
BaseUrl = Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 "
                                             "[env: ANCHOR_LLM_BASE_URL]. Unset = embedded model.",
                                             rich_help_panel=LLM_PANEL)]
Model = Annotated[str | None, typer.Option("--model", help="Model name on the server [env: ANCHOR_LLM_MODEL]; "
                                           "default: the server's first listed model.", rich_help_panel=LLM_PANEL)]
ApiKey = Annotated[str | None, typer.Option("--api-key", help="API key [env: ANCHOR_LLM_API_KEY]; prefer the env var. "
                                            "Never logged or cached.", rich_help_panel=LLM_PANEL, show_default=False)]
NoCache = Annotated[bool, typer.Option("--no-cache", help="Bypass the persistent response cache.",
                                       rich_help_panel=LLM_PANEL)]
CacheDir = Annotated[Path | None, typer.Option("--cache-dir", help="Cache directory [env: ANCHOR_CACHE_DIR].",
                                               rich_help_panel=LLM_PANEL)]
Seed = Annotated[int, typer.Option("--seed", help="Sampling seed; runs with different seeds are cached apart.",
                                   rich_help_panel=LLM_PANEL)]
Timeout = Annotated[float | None, typer.Option("--timeout", help="Seconds per request before retrying "
                                               "[env: ANCHOR_LLM_TIMEOUT]; retries of failed requests: "
                                               "ANCHOR_LLM_RETRIES (default 6).", rich_help_panel=LLM_PANEL)]
Concurrency = Annotated[int | None, typer.Option("--concurrency", help="Requests in flight at once "
                                                 "[env: ANCHOR_LLM_CONCURRENCY].", rich_help_panel=LLM_PANEL)]
ParseRetries = Annotated[int, typer.Option("--parse-retries", help="Re-asks after malformed or schema-violating "
                                           "answers (paper: 20).", rich_help_panel=LLM_PANEL)]
JsonOut = Annotated[bool, typer.Option("--json", help="Machine-readable JSON on stdout instead of the readable view.")]


def settings_from(base_url: str | None, model: str | None, api_key: str | None, no_cache: bool,
                  cache_dir: Path | None, seed: int, timeout: float | None, concurrency: int | None,
                  parse_retries: int) -> LLMSettings:
    return LLMSettings.from_env(base_url=base_url, model=model, api_key=api_key, use_cache=not no_cache,
                                cache_dir=cache_dir, seed=seed, timeout=timeout, max_concurrency=concurrency,
                                parse_retries=parse_retries)


# --------------------------------------------------------------------------- error handling & progress


def fail(message: str, code: int = 2) -> typer.Exit:
    # soft_wrap: never hard-wrap the message at the console width (80 columns when stderr is not
    # a terminal), so an error stays one line in logs and for callers that parse it.
    # escape: the message quotes paths and answers, whose square brackets are not rich markup.
    err.print(f"[bold red]error:[/bold red] {escape(message)}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Known failures become one clear line on stderr and exit code 2 (set ANCHOR_DEBUG=1 for tracebacks)."""
    if os.environ.get("ANCHOR_DEBUG"):
        yield
        return
    try:
        yield
    except typer.Exit:
        raise
    except (AnchorError, ValueError, OSError) as exc:
        message = str(exc)
        if isinstance(exc, ValidationError):
            message = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        raise fail(message) from None
    except KeyboardInterrupt:
        raise fail("interrupted", code=130) from None


class RichReporter:
    """Maps progress events to one bar per stage on stderr."""

    def __init__(self, enabled: bool = True) -> None:
        self.progress = Progress(TextColumn("{task.description:<22}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[note]}"), TimeElapsedColumn(), console=err,
                                 disable=not enabled, transient=False)
        self.tasks: dict[str, Any] = {}

    def __call__(self, event: ProgressEvent) -> None:
        task = self.tasks.get(event.stage)
        note = event.message
        if "factors" in event.info:
            note = f"{event.info['factors']} factors  {note}"
        elif event.info:
            note = "  ".join(f"{k} {v}" for k, v in event.info.items()) + (f"  {note}" if note else "")
        if task is None:
            task = self.tasks[event.stage] = self.progress.add_task(event.stage, total=event.total, note=note)
        self.progress.update(task, completed=event.done, total=event.total, note=note)

    def __enter__(self) -> Reporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


# --------------------------------------------------------------------------- llm ping


@llm_app.command("ping")
def llm_ping(
    base_url: BaseUrl = None, model: Model = None, api_key: ApiKey = None, no_cache: NoCache = True,
    cache_dir: CacheDir = None, seed: Seed = 0, timeout: Timeout = None, concurrency: Concurrency = None,
    parse_retries: ParseRetries = 3, json_out: JsonOut = False,
) -> None:
    """One structured round trip to the configured backend: backend, model, latency, tokens."""
    from anchor.llm.prompt import PromptSpec
    from anchor.llm.settings import make_client
    from anchor.prompts import VerbalProbability

    prompt = PromptSpec(stage="ping", system="Answer in JSON.", schema=VerbalProbability, max_tokens=24,
                        user="What is the probability that a fair coin lands heads?")
    with friendly_errors():
        settings = settings_from(base_url, model, api_key, no_cache, cache_dir, seed, timeout, concurrency,
                                 parse_retries)
        client = make_client(settings)
        t0 = time.perf_counter()
        answer = run_sync(client.ask(prompt), client)
        latency = time.perf_counter() - t0
        total = client.ledger.total()
        info = {"backend": client.backend.name, "model": client.backend.model, "latency_s": round(latency, 3),
                "prompt_tokens": total.prompt_tokens, "completion_tokens": total.completion_tokens,
                "attempts": total.llm_calls, "cached": total.cache_hits > 0, "answer": answer.model_dump()}
        if json_out:
            emit_json(info)
        else:
            out.print(f"[bold green]ok[/bold green]  backend: {info['backend']}  model: {info['model']}")
            out.print(f"    latency: {latency:.2f} s   tokens: {total.prompt_tokens} prompt + "
                      f"{total.completion_tokens} completion   attempts: {total.llm_calls}"
                      + ("   (from cache)" if info["cached"] else ""))
            out.print(f"    answer: {answer.model_dump_json()}")


# --------------------------------------------------------------------------- cache


@cache_app.command("info")
def cache_info(cache_dir: CacheDir = None) -> None:
    """Where the cache lives and how many answers it holds per stage."""
    from anchor.llm.cache import ResponseCache

    with friendly_errors():
        settings = LLMSettings.from_env(cache_dir=cache_dir)
        cache = ResponseCache(settings.response_cache_path)
        out.print(f"{cache.path}: {len(cache)} cached answers")
        for stage, n in sorted(cache.stats().items()):
            out.print(f"  {stage:<32} {n}")


@cache_app.command("clear")
def cache_clear(cache_dir: CacheDir = None, yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False
                ) -> None:
    """Delete every cached answer."""
    from anchor.llm.cache import ResponseCache

    with friendly_errors():
        settings = LLMSettings.from_env(cache_dir=cache_dir)
        path = settings.response_cache_path
        if not yes and not typer.confirm(f"Delete all cached answers in {path}?"):
            raise typer.Exit(1)
        n = ResponseCache(path).clear()
        out.print(f"removed {n} cached answers")


def main() -> None:
    # Registers build/infer/demo and eval/report on import.
    from anchor import commands, eval_commands  # noqa: F401

    app()


if __name__ == "__main__":
    main()
