"""Keeping the server busy: several samples per request (n), CPU work off the event loop, and
results that do not depend on how the answers were fetched."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from anchor.cli import app
from anchor.compute import offload
from anchor.compute.workerproc import WorkerDied, WorkerProcess
from anchor.embedding.embed import MiniLMEmbedder
from anchor.llm import CostLedger, LLMClient, PromptSpec, ResponseCache
from anchor.llm.ledger import CallRecord, summarize
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.llm.settings import LLMSettings
from anchor.runs.session import instance_slots
from anchor.space.structure import cluster_embeddings
from tests.fakeserver import FakeOpenAIServer


class Pick(BaseModel):
    value: int


PICK = PromptSpec(stage="unit.pick", system="Pick a number.", user="Topic: {topic}", schema=Pick, max_tokens=32,
                  temperature=0.7)


def seed_responder(bad_seeds: frozenset[int] = frozenset()):
    """Answers with the request's seed (so each sample's answer is known), or off-schema text
    for the seeds in ``bad_seeds``."""

    def answer(body: dict) -> str:
        seed = body.get("seed")
        return "not json at all" if seed in bad_seeds else json.dumps({"value": seed})

    return answer


def client_for(server: FakeOpenAIServer, tmp_path: Path, name: str, **kw) -> LLMClient:
    backend = OpenAICompatibleBackend(server.base_url, "fake-model")
    return LLMClient(backend, cache=ResponseCache(tmp_path / f"{name}.sqlite"), ledger=CostLedger(), seed=3,
                     parse_retries=3, **kw)


async def samples_of(client: LLMClient, topic: str = "noodles", samples: int = 3) -> list[int]:
    try:
        answers = await client.ask_samples(PICK, samples=samples, topic=topic)
        return [a.value for a in answers]
    finally:
        await client.aclose()


def sample_requests(server: FakeOpenAIServer) -> list[dict]:
    return [b for b in server.requests if b["messages"][-1]["content"].startswith("Topic:")]


# --------------------------------------------------------------------------- the client


def test_n_request_gives_each_sample_the_answer_of_its_own_request(tmp_path):
    with FakeOpenAIServer(responder=seed_responder()) as server:
        batched = client_for(server, tmp_path, "batched")
        values = asyncio.run(samples_of(batched))
        asked = sample_requests(server)
        assert len(asked) == 1 and asked[0]["n"] == 3
        first = asked[0]["seed"]
        # Sample i is seeded first + i, exactly as a request of its own would be.
        assert values == [first, first + 1, first + 2]
        assert batched.backend.honours_n is True

        single = client_for(server, tmp_path, "single", samples_per_request=1)
        assert asyncio.run(samples_of(single)) == values
        alone = sample_requests(server)[1:]
        assert len(alone) == 3 and all("n" not in b for b in alone)
        assert sorted(b["seed"] for b in alone) == values

    cost = batched.ledger.summary()[0]
    assert (cost.llm_calls, cost.samples, cost.failed_attempts) == (1, 3, 0)
    assert [r.samples for r in batched.ledger.records] == [3]
    cost = single.ledger.summary()[0]
    assert (cost.llm_calls, cost.samples) == (3, 3)


def test_each_sample_is_cached_under_its_own_index(tmp_path):
    with FakeOpenAIServer(responder=seed_responder()) as server:
        first = client_for(server, tmp_path, "shared")
        values = asyncio.run(samples_of(first))

        async def one_by_one(client: LLMClient) -> list[int]:
            try:
                return [(await client.ask(PICK, sample_index=i, topic="noodles")).value for i in range(3)]
            finally:
                await client.aclose()

        again = client_for(server, tmp_path, "shared")
        assert asyncio.run(one_by_one(again)) == values
        # More samples later: only the new indices are asked for, as one request for both.
        more = client_for(server, tmp_path, "shared")
        five = asyncio.run(samples_of(more, samples=5))
        assert five[:3] == values and five[3:] == [values[0] + 3, values[0] + 4]
        assert [b.get("n") for b in sample_requests(server)] == [3, 2]
    assert again.ledger.summary()[0].cache_hits == 3 and again.ledger.summary()[0].llm_calls == 0


def test_answers_cached_one_request_per_sample_are_found_by_ask_samples(tmp_path):
    """What an older version cached (one ask per sample index) is what ask_samples looks up."""
    with FakeOpenAIServer(responder=seed_responder()) as server:
        old = client_for(server, tmp_path, "old", samples_per_request=1)

        async def one_by_one() -> list[int]:
            try:
                return [(await old.ask(PICK, sample_index=i, topic="noodles")).value for i in range(3)]
            finally:
                await old.aclose()

        values = asyncio.run(one_by_one())
        before = server.completions
        new = client_for(server, tmp_path, "old")
        assert asyncio.run(samples_of(new)) == values
        assert server.completions == before
    assert new.ledger.summary()[0].cache_hits == 3


def test_server_that_ignores_n_is_noticed_once_and_gives_the_same_answers(tmp_path):
    with FakeOpenAIServer(responder=seed_responder()) as reference:
        expected = asyncio.run(samples_of(client_for(reference, tmp_path, "ref", samples_per_request=1)))
        expected_b = asyncio.run(samples_of(client_for(reference, tmp_path, "ref"), topic="pasta"))
    with FakeOpenAIServer(responder=seed_responder(), honour_n=False) as server:
        client = client_for(server, tmp_path, "ignored")
        assert asyncio.run(samples_of(client)) == expected
        assert client.backend.honours_n is False
        first = sample_requests(server)
        # One request asked for 3 and got 1; the two missing samples were then asked for alone.
        assert [b.get("n") for b in first] == [3, None, None]
        later = client_for(server, tmp_path, "ignored")
        later.backend = client.backend  # the same backend: it already knows
        assert asyncio.run(samples_of(later, topic="pasta")) == expected_b
        assert all("n" not in b for b in sample_requests(server)[3:])
    records = client.ledger.records
    assert [r.samples for r in records] == [1, 1, 1]
    assert "1 of 3 answers returned" in records[0].detail


def test_server_that_refuses_n_falls_back_to_separate_requests(tmp_path):
    with FakeOpenAIServer(responder=seed_responder()) as reference:
        expected = asyncio.run(samples_of(client_for(reference, tmp_path, "ref", samples_per_request=1)))
    with FakeOpenAIServer(responder=seed_responder(), refuse_n=True) as server:
        client = client_for(server, tmp_path, "refused")
        assert asyncio.run(samples_of(client)) == expected
        assert client.backend.honours_n is False
        assert [b.get("n") for b in sample_requests(server)] == [3, None, None, None]


def test_unusable_answer_in_an_n_request_is_asked_again_as_it_would_have_been(tmp_path):
    probe = LLMClient(OpenAICompatibleBackend("http://127.0.0.1:9/v1", "fake-model"), seed=3)
    bad = frozenset({probe._derive_seed(1, 0)})  # sample 1's first answer is off-schema
    with FakeOpenAIServer(responder=seed_responder(bad)) as server:
        batched = client_for(server, tmp_path, "batched")
        single = client_for(server, tmp_path, "single", samples_per_request=1)
        values = asyncio.run(samples_of(batched))
        assert asyncio.run(samples_of(single)) == values
    retry_seed = probe._derive_seed(1, 1)
    assert values == [probe._derive_seed(0, 0), retry_seed, probe._derive_seed(2, 0)]
    first, again = batched.ledger.records
    assert (first.outcome, first.samples, again.outcome) == ("ok", 3, "ok")
    assert "answer 2" in first.detail
    cost = single.ledger.summary()[0]
    assert (cost.llm_calls, cost.failed_attempts, cost.samples) == (4, 1, 4)


def test_samples_per_request_caps_n(tmp_path):
    with FakeOpenAIServer(responder=seed_responder()) as server:
        client = client_for(server, tmp_path, "capped", samples_per_request=2)
        values = asyncio.run(samples_of(client, samples=5))
        assert sorted(b.get("n") or 1 for b in sample_requests(server)) == [1, 2, 2]
    assert values == [values[0] + i for i in range(5)]


def test_settings_carry_samples_per_request(monkeypatch):
    monkeypatch.setenv("ANCHOR_LLM_SAMPLES_PER_REQUEST", "1")
    assert LLMSettings.from_env().samples_per_request == 1
    monkeypatch.setenv("ANCHOR_LLM_SAMPLES_PER_REQUEST", "0")
    with pytest.raises(Exception, match="ANCHOR_LLM_SAMPLES_PER_REQUEST"):
        LLMSettings.from_env()


def test_cost_rows_count_requests_and_samples():
    records = [CallRecord(stage="voting", outcome="ok", samples=3), CallRecord(stage="voting", outcome="ok"),
               CallRecord(stage="voting", outcome="transient_error"), CallRecord(stage="voting", outcome="cache_hit"),
               CallRecord(stage="voting", outcome="invalid_output", samples=2)]
    (row,) = summarize(records)
    # Records written before the field existed (samples=None) count one answer when they got one.
    assert (row.llm_calls, row.samples, row.failed_attempts, row.cache_hits) == (4, 6, 2, 1)
    ledger = CostLedger()
    for r in records:
        ledger.record(r)
    assert ledger.tally().samples == 6 and ledger.tally().llm_calls == 4


# --------------------------------------------------------------------------- off the event loop


def test_vectors_do_not_depend_on_what_they_are_encoded_with(embedder):
    texts = ["water", "cost", "", "starch release", "boiling point at high altitude",
             "the pot is much larger than the amount of water needs"]
    together = embedder.encode(texts)
    fresh = MiniLMEmbedder()
    alone = np.stack([fresh.encode([t])[0] for t in texts])
    mixed = MiniLMEmbedder().encode([*texts[::-1], "an unrelated sentence of some length", "risk"])[:len(texts)][::-1]
    assert np.array_equal(together, alone)
    assert np.array_equal(together, mixed)


class CountingEmbedder:
    model_id = "counting"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts):
        self.calls.append(list(texts))
        return np.array([[float(len(t)), float(sum(map(ord, t)))] for t in texts], dtype=np.float32)


class GatedEmbedder(CountingEmbedder):
    """Its first call waits until the test opens the gate, so requests can pile up meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.gate = threading.Event()

    def encode(self, texts):
        self.started.set()
        self.gate.wait(timeout=30)
        return super().encode(texts)


async def test_encodes_arriving_while_the_model_is_busy_share_one_call():
    emb = GatedEmbedder()
    first = asyncio.ensure_future(offload.encode(emb, ["a", "bb"]))
    assert await asyncio.to_thread(emb.started.wait, 30)
    later = [["ccc"], ["bb", "dddd"], ["a"]]
    rest = [asyncio.ensure_future(offload.encode(emb, r)) for r in later]
    # Open the gate once the three are queued behind the busy model (its batcher's pending requests).
    batcher = offload._batcher(emb)  # noqa: SLF001 - its queue is what the test waits for
    deadline = time.monotonic() + 30  # only so that a broken batcher cannot hang the suite
    while len(batcher.pending) < len(later):
        assert time.monotonic() < deadline, f"{len(batcher.pending)} of {len(later)} encodes queued after 30 s"
        await asyncio.sleep(0.01)
    emb.gate.set()
    results = await asyncio.gather(first, *rest)
    for texts, vectors in zip([["a", "bb"], *later], results, strict=True):
        assert vectors.tolist() == [[float(len(t)), float(sum(map(ord, t)))] for t in texts]
    # Each text of the queued requests encoded once, in one call.
    assert emb.calls == [["a", "bb"], ["ccc", "bb", "dddd", "a"]]


async def test_helper_processes_give_the_same_vectors_and_clusters(embedder, monkeypatch):
    monkeypatch.setenv("ANCHOR_COMPUTE", "processes")
    texts = [f"factor about {w} and {v}" for w in ("heat", "time", "salt", "starch") for v in ("cost", "taste", "risk")]
    remote = await offload.encode(MiniLMEmbedder(), texts)
    assert np.array_equal(remote, embedder.encode(texts))
    timed = await offload.cluster(cluster_embeddings, remote, seed=4)
    local = cluster_embeddings(remote, seed=4)
    assert np.array_equal(timed.result.labels, local.labels)
    assert timed.result.stats == local.stats and timed.seconds > 0


def test_unknown_compute_mode_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("ANCHOR_COMPUTE", "gpu")
    with pytest.raises(ValueError, match="ANCHOR_COMPUTE"):
        offload.mode()


class Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:  # pickle rebuilds it as Unpicklable(msg): fails
        super().__init__(f"{a} and {b}")


def raise_unpicklable() -> None:
    raise Unpicklable(1, 2)


def test_helper_process_that_dies_fails_its_jobs_clearly():
    worker = WorkerProcess("test")
    try:
        assert worker.submit(os.getpid).result(timeout=60) != os.getpid()
        with pytest.raises(WorkerDied, match="test process exited \\(code 7\\)"):
            worker.submit(os._exit, 7).result(timeout=60)
        with pytest.raises(ZeroDivisionError):
            worker.submit(divmod, 1, 0).result(timeout=60)  # and it comes back for the next job
        with pytest.raises(RuntimeError, match="Unpicklable: 1 and 2"):
            worker.submit(raise_unpicklable).result(timeout=60)
        assert worker.submit(divmod, 7, 2).result(timeout=60) == (3, 1)
    finally:
        worker.close()


def wait_for_file(path: str) -> str:
    """A job that keeps the helper process busy until the test creates ``path``."""
    import time

    for _ in range(6000):
        if os.path.exists(path):
            return "released"
        time.sleep(0.01)
    return "timed out"


def test_submit_never_waits_for_a_busy_helper_process(tmp_path):
    """A job bigger than a pipe's 64 KB, sent while the helper works on an earlier one: submit (on the
    event loop, in anchor) returned only when the helper read it, stalling every request meanwhile."""
    worker = WorkerProcess("test")
    gate = tmp_path / "gate"
    big = b"x" * (4 << 20)
    try:
        first = worker.submit(wait_for_file, str(gate))
        sent: list = []
        sender = threading.Thread(target=lambda: sent.append(worker.submit(len, big)))
        sender.start()
        sender.join(timeout=120)  # returns at once when it works; the bound only catches a submit that blocks
        returned, still_busy = not sender.is_alive(), not first.done()
        gate.touch()
        sender.join()
        assert returned and still_busy
        assert first.result(timeout=60) == "released" and sent[0].result(timeout=60) == len(big)
    finally:
        gate.touch()
        worker.close()


def test_two_instances_per_request_slot():
    assert [instance_slots(c) for c in (1, 8, 32)] == [2, 16, 64]


# --------------------------------------------------------------------------- whole evaluations

cli = CliRunner()


def evaluate(server: FakeOpenAIServer, cache: Path, out: Path, monkeypatch, samples_per_request: int) -> dict:
    monkeypatch.setenv("ANCHOR_LLM_SAMPLES_PER_REQUEST", str(samples_per_request))
    result = cli.invoke(app, ["eval", "--base-url", server.base_url, "--cache-dir", str(cache), "--out", str(out),
                              "--json", "--dataset", "common2sense-pairwise", "--method", "anchor", "--limit", "2",
                              "--n-target", "6", "--batch-size", "3", "--max-rounds", "2"])
    assert result.exit_code == 0, result.output
    predictions = sorted((json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()),
                         key=lambda p: p["id"])
    metrics = json.loads((out / "metrics.json").read_text())
    return {"predictions": [{k: p[k] for k in ("id", "p_gold_1", "p_gold_2", "prediction", "status", "n_factors")}
                            for p in predictions],
            "metrics": {k: metrics[k] for k in ("runs", "mean", "std", "calibration")},
            "cost": metrics["cost"]["total"]}


def test_results_do_not_depend_on_how_samples_were_fetched(tmp_path, monkeypatch):
    with FakeOpenAIServer(deterministic=True) as server:
        separate = evaluate(server, tmp_path / "c1", tmp_path / "separate", monkeypatch, 1)
        batched = evaluate(server, tmp_path / "c2", tmp_path / "batched", monkeypatch, 16)
        # The same answers from the cache: no request, the same results.
        replay = evaluate(server, tmp_path / "c1", tmp_path / "replay", monkeypatch, 16)
    with FakeOpenAIServer(deterministic=True, honour_n=False) as llama_like:
        ignored = evaluate(llama_like, tmp_path / "c3", tmp_path / "ignored", monkeypatch, 16)

    assert separate["predictions"] == batched["predictions"] == replay["predictions"] == ignored["predictions"]
    assert separate["metrics"] == batched["metrics"] == replay["metrics"] == ignored["metrics"]
    assert any(p["p_gold_1"] is not None for p in separate["predictions"])  # something was estimated
    # Voting and selection samples travel together where n is honoured, one per request otherwise.
    assert batched["cost"]["llm_calls"] < batched["cost"]["samples"] == separate["cost"]["samples"]
    assert separate["cost"]["llm_calls"] == separate["cost"]["samples"]
    assert ignored["cost"]["llm_calls"] == ignored["cost"]["samples"] == separate["cost"]["samples"]
    assert replay["cost"]["llm_calls"] == 0


def test_a_helper_process_leaves_no_pipe_open_when_it_dies_or_is_closed():
    worker = WorkerProcess("pipes")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(WorkerDied):
            worker.submit(os._exit, 3).result(timeout=60)
        assert worker.submit(divmod, 7, 2).result(timeout=60) == (3, 1)  # a new process
        worker.close()
        # The reader and writer threads of both processes finish (waited for, not given a fixed time:
        # while one still runs it holds its pipe, and no warning could show).
        threads = [t for t in threading.enumerate() if t.name in ("anchor-pipes-reader", "anchor-pipes-writer")]
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_job_whose_caller_gave_up_does_not_stop_the_answers_to_the_next_ones(tmp_path):
    """A caller cancelled while its job ran (a run stopped half-way, a job of anchor serve cancelled): the
    answer that came back later was set on the cancelled future, which raised in the reader thread and
    ended it, so no later job of that helper process was ever answered."""
    worker = WorkerProcess("test")
    gate = tmp_path / "gate"
    try:
        abandoned = worker.submit(wait_for_file, str(gate))
        assert abandoned.cancel()
        gate.touch()
        assert worker.submit(divmod, 7, 2).result(timeout=60) == (3, 1)
    finally:
        worker.close()
