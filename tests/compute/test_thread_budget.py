"""Helper processes started side by side share the cores among their libraries' thread pools
(``anchor.compute.workerproc.thread_budget``) instead of each starting a thread a core."""

from __future__ import annotations

import asyncio
import queue
import threading

import threadpoolctl

from anchor.compute import workerproc
from anchor.compute.workerproc import THREAD_VARIABLES, HelperProcess, thread_budget
from anchor.llm.settings import LLMSettings
from anchor.predict.config import CasesInput, make_predict_config
from anchor.runs import processes
from anchor.runs.worker import WorkerSetup
from tests.predict.test_predict import COLUMNS, write_csv


def test_each_helper_gets_its_share_of_the_cores_and_at_least_one_thread(monkeypatch):
    monkeypatch.setattr(workerproc, "usable_cores", lambda: 16)
    assert thread_budget(4, environ={}) == dict.fromkeys(THREAD_VARIABLES, "4")
    assert thread_budget(3, environ={}) == dict.fromkeys(THREAD_VARIABLES, "5")
    assert thread_budget(32, environ={}) == dict.fromkeys(THREAD_VARIABLES, "1")


def test_a_variable_the_user_set_is_left_as_it_is(monkeypatch):
    monkeypatch.setattr(workerproc, "usable_cores", lambda: 16)
    budget = thread_budget(2, environ={"OMP_NUM_THREADS": "12", "MKL_NUM_THREADS": ""})
    assert "OMP_NUM_THREADS" not in budget
    assert budget["MKL_NUM_THREADS"] == "8"  # set but empty: not a choice
    assert budget["NUMBA_NUM_THREADS"] == "8"


def test_a_helper_process_and_its_blas_start_with_the_budget_it_was_given():
    answers: queue.Queue = queue.Queue()
    ended = threading.Event()
    helper = HelperProcess("budget", "anchor.compute.workerproc", on_message=answers.put,
                           on_exit=lambda code: ended.set(), env={"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    helper.start()
    try:
        helper.send((0, exec, ("import numpy",)))  # loads OpenBLAS, which reads the variables as it starts
        helper.send((1, threadpoolctl.threadpool_info, ()))
        assert answers.get(timeout=60) == (0, True, None)
        job, ok, pools = answers.get(timeout=60)
    finally:
        helper.close(timeout=30)
    assert (job, ok) == (1, True)
    blas = [pool for pool in pools if pool["user_api"] == "blas"]
    assert blas and all(pool["num_threads"] == 1 for pool in blas)


def test_the_process_pool_starts_every_helper_with_the_budget_of_its_worker_count(monkeypatch, tmp_path):
    started: list[dict[str, str]] = []

    class Recorded:  # the pool's side of a helper, without the process
        def __init__(self, name, module, *, on_message, on_exit=None, env=None):
            started.append(dict(env or {}))

        def start(self):
            pass

        def send(self, message):
            pass

    monkeypatch.setattr(processes, "HelperProcess", Recorded)
    monkeypatch.setattr(workerproc, "usable_cores", lambda: 16)
    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NUMEXPR_NUM_THREADS", "2")  # the user's: not in the budget
    cases = tmp_path / "cases.csv"
    write_csv(cases)
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1", model="fake-model", cache_dir=tmp_path / "cache")
    config = make_predict_config(cases=CasesInput.of(cases, columns=dict(c.split("=") for c in COLUMNS[1::2])),
                                 method="vanilla", settings=settings, anchor_config=None)
    pool = processes.ProcessPool(WorkerSetup(config=config, settings=settings, artefacts=tmp_path), 4)
    asyncio.run(pool.start())
    budget = {name: "4" for name in THREAD_VARIABLES if name != "NUMEXPR_NUM_THREADS"}
    assert started == [budget] * 4
