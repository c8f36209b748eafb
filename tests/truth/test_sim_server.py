"""The simulated LLM over HTTP gives exactly the in-process answers: the real ``openai`` SDK, through
anchor's own OpenAICompatibleBackend and LLMClient, against the stdlib server on a local port."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest

from anchor import prompts
from anchor.errors import FatalBackendError
from anchor.inference.elicit import discover_latents, elicit_latent_params, elicit_phis
from anchor.llm.client import LLMClient
from anchor.llm.openai_backend import OpenAICompatibleBackend
from anchor.llm.structured import inline_schema
from anchor.methods import baselines
from anchor.space.voting import vote_labels
from anchor.truth.simulate import SimErrors, SimulatedBackend, SimulatedLLM
from anchor.truth.simulate.server import SimServer
from anchor.truth.world import save_worlds
from anchor.types import Factor
from tests.truth.sim_worlds import LATENT_FACTORS, NB_FACTORS, latent_world, nb_world, scenario_of, world_file

NB, LAT = nb_world(), latent_world()
#: The ``anchor`` command, as a subprocess of this Python.
ANCHOR = [sys.executable, "-c", "from anchor.cli.app import main; main()"]


@pytest.fixture(scope="module")
def served() -> Any:
    llm = SimulatedLLM(world_file(), SimErrors(), seed=3)  # the defaults: every kind of error, noisy
    with SimServer(llm) as server:
        yield llm, server


async def everything(client: LLMClient) -> list[Any]:
    """A bit of every kind of request: samples (n), keyed answers, partitions, text with logprobs."""
    nb_texts = [spec[0] for spec in NB_FACTORS.values()]
    lat = [Factor(id=f"f{i + 1}", text=spec[0]) for i, spec in enumerate(LATENT_FACTORS.values())]
    conditions = [c.text for c in NB.conditions]
    out: list[Any] = [await vote_labels(client, scenario_of(NB), nb_texts, samples=5, batch_size=4)]
    out.append(await elicit_phis(client, scenario_of(NB), [Factor(id=f"f{i + 1}", text=t) for i, t in enumerate(nb_texts)]))
    grouping = await discover_latents(client, scenario_of(LAT), lat)
    out.append((grouping.names, grouping.groups))
    out.append(await elicit_latent_params(client, scenario_of(LAT), grouping, lat))
    for name in ("vanilla", "vanilla-direct", "cot", "cot-direct", "logits"):
        for text in conditions:
            out.append((name, (await baselines.ESTIMATORS[name](client, scenario_of(NB), text, 1)).p_outcome1))
    out.append(await baselines.compare(client, scenario_of(NB), NB.outcome1, conditions[0], conditions[2]))
    out.append((await baselines.factor_based(client, scenario_of(NB), conditions[1], gold=2)).p_outcome1)
    return out


def test_in_process_and_http_answers_are_identical(served: Any) -> None:
    llm, server = served

    async def both() -> tuple[list[Any], list[Any]]:
        local = LLMClient(SimulatedBackend(llm), seed=11)
        remote = LLMClient(OpenAICompatibleBackend(server.base_url, None), seed=11)
        try:
            return await everything(local), await everything(remote)
        finally:
            await remote.aclose()

    local, remote = asyncio.run(both())
    assert remote == local
    # and the errors were on: something differs from the zero-error answers
    oracle = asyncio.run(everything(LLMClient(SimulatedBackend(SimulatedLLM(world_file(), SimErrors.zero())), seed=11)))
    assert oracle != local


def test_n_choices_are_the_lone_requests_with_consecutive_seeds(served: Any) -> None:
    llm, server = served
    sdk = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    messages = prompts.VOTE_LABELS.render(scenario=NB.scenario, outcome1=NB.outcome1, outcome2=NB.outcome2,
                                          factors=prompts.numbered([s[0] for s in NB_FACTORS.values()], keys=True))
    schema = inline_schema(prompts.keyed_schema("Votes", len(NB_FACTORS), "label"))
    response = sdk.chat.completions.create(
        model=llm.model, messages=messages, n=4, seed=40,  # type: ignore[arg-type]
        response_format={"type": "json_schema", "json_schema": {"name": "Votes", "schema": schema}})
    texts = [c.message.content for c in sorted(response.choices, key=lambda c: c.index)]
    assert texts == [llm.answer(messages, json_schema=schema, seed=40 + j).text for j in range(4)]
    assert response.usage is not None and response.usage.prompt_tokens > 0


def test_logprobs_come_in_the_openai_wire_format(served: Any) -> None:
    llm, server = served
    sdk = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    values = {"scenario": NB.scenario, "condition": NB.conditions[0].text, "outcome1": NB.outcome1,
              "outcome2": NB.outcome2}
    messages = [{"role": "system", "content": prompts.LOGITS_MESSAGES_SYSTEM},
                {"role": "user", "content": prompts.LOGITS_USER.format(**values)}]
    response = sdk.chat.completions.create(model=llm.model, messages=messages, max_tokens=1, logprobs=True,  # type: ignore[arg-type]
                                           top_logprobs=5, seed=1)
    choice = response.choices[0]
    assert choice.message.content in ("1", "2")
    assert choice.logprobs is not None and choice.logprobs.content is not None
    first = choice.logprobs.content[0]
    top = {alt.token: alt.logprob for alt in first.top_logprobs}
    local = llm.answer(messages, seed=1, top_logprobs=5, max_tokens=1).logprobs
    assert local is not None and top == local[0].top and first.token == local[0].token
    assert sorted(top) == ["1", "2"] and abs(sum(pow(2.718281828459045, v) for v in top.values()) - 1) < 1e-9


def test_unrecognised_requests_get_400_and_fail_the_client_at_once(served: Any) -> None:
    llm, server = served
    sdk = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="not recognised by the simulated LLM.*unrecognised system"):
        sdk.chat.completions.create(model=llm.model, messages=[{"role": "system", "content": "Be a poet."},
                                                               {"role": "user", "content": "A poem."}])

    async def ask() -> None:
        client = LLMClient(OpenAICompatibleBackend(server.base_url, llm.model), seed=0)
        try:
            await client.ask(prompts.VANILLA, scenario="No world's scenario.", condition="x", outcome1="a",
                             outcome2="b")
        finally:
            await client.aclose()

    with pytest.raises(FatalBackendError, match="unknown scenario"):
        asyncio.run(ask())


def test_another_model_name_gets_404_and_models_lists_the_one(served: Any) -> None:
    llm, server = served
    sdk = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    assert [m.id for m in sdk.models.list().data] == [llm.model]
    with pytest.raises(openai.NotFoundError, match="not served here"):
        sdk.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "hi"}])
    request = urllib.request.Request(server.base_url + "/chat/completions", data=b"{not json", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=10)
    assert caught.value.code == 400 and "not JSON" in json.loads(caught.value.read())["error"]["message"]


def test_model_name_is_a_digest_of_worlds_errors_and_seed() -> None:
    base = SimulatedLLM(world_file(), SimErrors(), seed=0).model
    assert base.startswith("sim-") and base == SimulatedLLM(world_file(), SimErrors(), seed=0).model
    assert base != SimulatedLLM(world_file(), SimErrors(), seed=1).model
    assert base != SimulatedLLM(world_file(), SimErrors.zero(), seed=0).model
    assert base != SimulatedLLM(world_file(NB), SimErrors(), seed=0).model


def test_the_serve_command_serves_a_world_file(tmp_path: Path) -> None:
    path = save_worlds(world_file(), tmp_path / "worlds.json")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([*ANCHOR, "truth", "serve", "--worlds", str(path), "--port", "0",
                             "--zero", "--set", "direct_curve.noise=0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = line.split(" at ")[-1].strip()
        assert line.startswith("serving sim-") and url.startswith("http://127.0.0.1:")
        expected = SimulatedLLM(world_file(), SimErrors.zero().model_copy(
            update={"direct_curve": SimErrors.zero().direct_curve.model_copy(update={"noise": 0.2})}), seed=0).model
        with urllib.request.urlopen(url + "/models", timeout=10) as reply:
            assert json.loads(reply.read())["data"][0]["id"] == expected
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_the_serve_command_names_a_bad_setting(tmp_path: Path) -> None:
    path = save_worlds(world_file(), tmp_path / "worlds.json")
    done = subprocess.run([*ANCHOR, "truth", "serve", "--worlds", str(path),
                           "--set", "map_recall=2"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: --set: map_recall:") and "Traceback" not in done.stderr
    done = subprocess.run([*ANCHOR, "truth", "serve", "--worlds", str(tmp_path / "none.json")],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2 and "no such world file" in done.stderr
