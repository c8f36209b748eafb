"""The simulated LLM: one pure function from a chat request to an answer, and the in-process backend.

:class:`SimulatedLLM` recognises the request (:mod:`.recognise`), finds the world it is about, and
answers it from that world's truth with the errors of its :class:`SimErrors`. It is deterministic:
the same request (messages, schema, seed) always gets the same answer, and every draw comes from a
random source seeded by the request (see :mod:`.errors`). A request it cannot place raises
:class:`~anchor.truth.simulate.recognise.Unrecognised`, a ``FatalBackendError``: never a random answer.

:class:`SimulatedBackend` wraps it in anchor's ``Backend`` protocol (``kind="simulated"``), so
``LLMClient`` (cache, ledger, retries, validation) drives it as it drives a server; the HTTP server
(:mod:`.server`) wraps the same object, so in-process and HTTP answers are identical.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from anchor.llm.base import Message, MultiCompletion, RawCompletion, TokenLogprob
from anchor.truth.simulate import baselines, bird, stages
from anchor.truth.simulate.core import Handler, Simulator
from anchor.truth.simulate.errors import SimErrors
from anchor.truth.simulate.recognise import Unrecognised, recognise
from anchor.truth.world import WorldFile

#: Every prompt the simulator answers, by its name in ``anchor.prompts`` (the logits request: "LOGITS").
HANDLERS: dict[str, Handler] = {**stages.HANDLERS, **baselines.HANDLERS, **bird.HANDLERS}


def model_name(worlds: WorldFile, errors: SimErrors, seed: int) -> str:
    """``sim-`` and a digest of what the answers depend on: the worlds, the errors and the seed."""
    blob = json.dumps([worlds.model_dump(mode="json"), errors.model_dump(mode="json"), seed], sort_keys=True)
    return "sim-" + hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def _trimmed(logprobs: list[TokenLogprob] | None, top: int | None) -> list[TokenLogprob] | None:
    """The log-probabilities asked for: none without ``top_logprobs``, else the ``top`` likeliest
    alternatives at each position (as a server lists them)."""
    if logprobs is None or top is None:
        return None
    out = []
    for item in logprobs:
        best = sorted(item.top.items(), key=lambda kv: -kv[1])[:max(0, top)]
        out.append(item.model_copy(update={"top": dict(best)}))
    return out


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


class SimulatedLLM:
    """Answers anchor's prompts about ``worlds`` with ``errors`` (default: a decent LLM), seeded by ``seed``."""

    def __init__(self, worlds: WorldFile, errors: SimErrors | None = None, seed: int = 0) -> None:
        self.errors = errors if errors is not None else SimErrors()
        self.seed = seed
        self.worlds = worlds
        self.model = model_name(worlds, self.errors, seed)
        self._sim = Simulator(worlds, self.errors, seed)

    def answer(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None,
               schema_name: str = "", temperature: float = 0.0, max_tokens: int = 512, seed: int | None = None,
               top_logprobs: int | None = None) -> RawCompletion:
        """The answer to one chat request (``seed`` None counts as 0); ``Unrecognised`` when it
        cannot be placed. ``schema_name`` and ``temperature`` do not change the answer: the schema
        itself and the seed do."""
        req = recognise(messages, json_schema=json_schema, seed=seed, top_logprobs=top_logprobs, max_tokens=max_tokens)
        handler = HANDLERS.get(req.name)
        if handler is None:
            raise Unrecognised(f"prompt {req.name} ({req.stage}) is recognised but the simulated LLM does not "
                               "answer it")
        reply = handler(self._sim, req)
        text = reply.text if reply.data is None else json.dumps(reply.data, ensure_ascii=False)
        assert text is not None
        prompt = sum(len(m["content"]) for m in req.messages)
        return RawCompletion(text=text, finish_reason="stop", prompt_tokens=max(1, math.ceil(prompt / 4)),
                             completion_tokens=_tokens(text), logprobs=_trimmed(reply.logprobs, top_logprobs))

    def answers(self, messages: list[dict[str, Any]], *, n: int, json_schema: dict[str, Any] | None = None,
                max_tokens: int = 512, seed: int | None = None, top_logprobs: int | None = None
                ) -> list[RawCompletion]:
        """``n`` answers to one request: answer ``j`` is the lone request's answer with seed ``seed + j``
        (as vLLM seeds the choices of a request), so asking for ``n`` and asking ``n`` times agree."""
        base = 0 if seed is None else seed
        return [self.answer(messages, json_schema=json_schema, max_tokens=max_tokens, seed=base + j,
                            top_logprobs=top_logprobs) for j in range(n)]


class SimulatedBackend:
    """The simulated LLM in process, as an anchor ``Backend`` (and a ``SamplingBackend``)."""

    kind = "simulated"
    max_parallel = 16
    honours_n: bool | None = True

    def __init__(self, llm: SimulatedLLM) -> None:
        self.llm = llm
        self.model = llm.model
        self.name = f"simulated:{llm.model}"

    @property
    def supports_logprobs(self) -> bool:
        return True

    async def complete(self, messages: list[Message], *, json_schema: dict[str, Any] | None, schema_name: str,
                       temperature: float, max_tokens: int, seed: int | None, top_logprobs: int | None
                       ) -> RawCompletion:
        return self.llm.answer(messages, json_schema=json_schema, schema_name=schema_name, temperature=temperature,
                               max_tokens=max_tokens, seed=seed, top_logprobs=top_logprobs)

    async def complete_choices(self, messages: list[Message], *, n: int, json_schema: dict[str, Any] | None,
                               schema_name: str, temperature: float, max_tokens: int, seed: int | None
                               ) -> MultiCompletion:
        choices = self.llm.answers(messages, n=n, json_schema=json_schema, max_tokens=max_tokens, seed=seed)
        return MultiCompletion(choices=choices, prompt_tokens=choices[0].prompt_tokens,
                               completion_tokens=sum(c.completion_tokens for c in choices))

    async def aclose(self) -> None:
        return None
