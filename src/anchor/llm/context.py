"""Keeping a prompt inside the model's context window when one of its fields is long.

Policy (used by the mapping stage and the direct baselines for the condition):

* A backend may declare ``context_tokens`` (its context window). The embedded model knows it
  (``n_ctx``) and counts a prompt's tokens exactly with its own tokenizer and chat template
  (``count_prompt_tokens``). For a server the window is a setting (``LLMSettings.context_tokens``,
  env ``ANCHOR_LLM_CONTEXT_TOKENS``, default :data:`DEFAULT_SERVER_CONTEXT_TOKENS`) and tokens are
  estimated from characters at :data:`CHARS_PER_TOKEN_ESTIMATE` characters a token, which
  overestimates for ordinary text. A backend that declares no window (the scripted test
  backend, unless told) gets every prompt unchanged.
* The long field is carried in full whenever the whole prompt, plus room for the answer, fits.
  Otherwise its beginning is kept, cut at a word boundary, followed by a marker such as
  ``[... 12,345 characters omitted ...]``, with the longest beginning for which the prompt fits.
  The room kept free is the prompt's ``max_tokens`` (an exact count); with an estimate it is
  ``max_tokens`` plus a tenth of the window, for the estimate's error and for a schema a server
  may have spelled out in the prompt.
* What was cut is returned as :class:`anchor.types.TextTruncation`, so stages can record it
  (the mapping trace, a baseline's note).

With several long fields (the Compare baseline's two conditions) the budget is shared: all fields
are capped at the same length, so a short one is kept whole and the long ones share the rest.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anchor.llm.base import Message
from anchor.llm.prompt import PromptSpec
from anchor.types import TextTruncation

__all__ = [
    "CHARS_PER_TOKEN_ESTIMATE",
    "DEFAULT_SERVER_CONTEXT_TOKENS",
    "ContextLimits",
    "FittedPrompt",
    "context_limits",
    "estimate_prompt_tokens",
    "fit_fields",
    "fit_prompt",
    "merge_truncations",
    "omission_marker",
]

#: Context window assumed for a server when none is configured: most current chat models serve
#: at least this much, and it holds every bundled fact-checking document whole.
DEFAULT_SERVER_CONTEXT_TOKENS = 8192
#: Characters per token for estimates. English prose averages about 4 with current tokenizers; 3
#: errs on the side of sending less.
CHARS_PER_TOKEN_ESTIMATE = 3.0
#: Tokens a chat template adds around each message (role markers, separators), for estimates.
MESSAGE_OVERHEAD_TOKENS = 8
#: Room kept free by an exact count beyond max_tokens (stop tokens, template tail).
EXACT_MARGIN_TOKENS = 16


def omission_marker(omitted_chars: int) -> str:
    return f"[... {omitted_chars:,} characters omitted ...]"


def estimate_prompt_tokens(messages: Sequence[Message]) -> int:
    """A character-based upper estimate of a chat prompt's tokens."""
    chars = sum(len(m.get("content", "")) for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN_ESTIMATE) + MESSAGE_OVERHEAD_TOKENS * (len(messages) + 1)


@dataclass(frozen=True)
class ContextLimits:
    """A backend's context window and how its prompts are counted."""

    context_tokens: int
    count: Callable[[list[Message]], int]
    exact: bool

    def prompt_budget(self, max_tokens: int) -> int:
        """Most prompt tokens that still leave room for an answer of ``max_tokens``."""
        reserve = max_tokens + (EXACT_MARGIN_TOKENS if self.exact else self.context_tokens // 10)
        return self.context_tokens - reserve


def context_limits(backend: object) -> ContextLimits | None:
    """The limits a backend declares, or None when it declares no context window."""
    tokens = getattr(backend, "context_tokens", None)
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0:
        return None
    counter = getattr(backend, "count_prompt_tokens", None)
    if callable(counter):
        return ContextLimits(tokens, counter, exact=True)
    return ContextLimits(tokens, estimate_prompt_tokens, exact=False)


@dataclass(frozen=True)
class FittedPrompt:
    """Values to render a prompt with, and what had to be cut (by field) for it to fit."""

    values: dict[str, Any]
    truncated: dict[str, TextTruncation] = field(default_factory=dict)

    def note(self) -> str | None:
        """One line for a result's note, or None when nothing was cut."""
        if not self.truncated:
            return None
        parts = [f"{name} truncated to fit the {t.context_tokens:,}-token context: kept {t.kept_chars:,} of "
                 f"{t.original_chars:,} characters" for name, t in self.truncated.items()]
        return "; ".join(parts)


def _head(text: str, chars: int) -> str:
    """The first ``chars`` characters, cut back to a word boundary when one is close."""
    if chars >= len(text):
        return text
    head = text[:chars]
    if text[chars].isspace():  # already at a word boundary
        return head.rstrip()
    space = head.rfind(" ")
    if space >= chars * 0.8:  # do not give up more than a fifth to find a boundary
        head = head[:space]
    return head.rstrip()


def _shortened(text: str, cap: int) -> tuple[str, int]:
    """(text cut to at most ``cap`` characters plus the marker, characters kept)."""
    if len(text) <= cap:
        return text, len(text)
    head = _head(text, cap)
    marker = omission_marker(len(text) - len(head))
    return (f"{head} {marker}" if head else marker), len(head)


def fit_fields(
    backend: object,
    render: Callable[[Mapping[str, Any]], list[Message]],
    values: Mapping[str, Any],
    fields: Sequence[str],
    *,
    max_tokens: int,
    stage: str = "",
) -> FittedPrompt:
    """Cut the text ``fields`` of ``values`` just enough for ``render(values)`` to fit the backend.

    ``render`` turns values into chat messages. The answer is exact when the backend counts tokens
    itself. If even empty fields do not fit (the rest of the prompt is too long), the fields are
    reduced to their markers and the backend will report the overflow.
    """
    limits = context_limits(backend)
    out = dict(values)
    if limits is None:
        return FittedPrompt(out)
    budget = limits.prompt_budget(max_tokens)
    if limits.count(render(out)) <= budget:
        return FittedPrompt(out)

    texts = {name: str(values[name]) for name in fields}
    longest = max(len(t) for t in texts.values())

    def attempt(cap: int) -> tuple[dict[str, Any], dict[str, int]]:
        trial = dict(values)
        kept: dict[str, int] = {}
        for name, text in texts.items():
            trial[name], kept[name] = _shortened(text, cap)
        return trial, kept

    # Largest common cap (in characters) for which the prompt fits. Token counts grow with the cap,
    # so a binary search finds it in about log2(longest) counts.
    lo, hi = 0, longest - 1
    best_values, best_kept = attempt(0)
    while lo <= hi:
        mid = (lo + hi) // 2
        trial, kept = attempt(mid)
        if limits.count(render(trial)) <= budget:
            best_values, best_kept = trial, kept
            lo = mid + 1
        else:
            hi = mid - 1
    truncated = {
        name: TextTruncation(original_chars=len(text), kept_chars=best_kept[name],
                             context_tokens=limits.context_tokens, counted="exact" if limits.exact else "estimate",
                             stages=[stage] if stage else [])
        for name, text in texts.items() if best_kept[name] < len(text)
    }
    return FittedPrompt(best_values, truncated)


def merge_truncations(first: TextTruncation | None, second: TextTruncation | None) -> TextTruncation | None:
    """One record for a text cut in several prompts: the stages that cut it and the least kept."""
    if first is None or second is None:
        return first or second
    worst = first if first.kept_chars <= second.kept_chars else second
    return worst.model_copy(update={"stages": list(dict.fromkeys([*first.stages, *second.stages]))})


def fit_prompt(backend: object, prompt: PromptSpec[Any], *, fields: Sequence[str] = ("condition",),
               max_tokens: int | None = None, **values: Any) -> FittedPrompt:
    """:func:`fit_fields` for a :class:`PromptSpec` (its ``max_tokens`` unless another is given)."""
    return fit_fields(backend, lambda v: prompt.render(**v), values, fields,
                      max_tokens=max_tokens or prompt.max_tokens, stage=prompt.stage)
