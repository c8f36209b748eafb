"""What the prompts share: the base of every answer schema, the schema factories for answers whose
shape depends on the request, and small helpers that lay out lists in a prompt.

The factories are cached so that an identical request produces an identical schema (and so an
identical cache key).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from anchor.llm.prompt import PromptSpec

LabelName = Literal["outcome1", "outcome2", "neutral"]
Verdict = Literal["keep", "duplicate", "irrelevant"]


class AnswerModel(BaseModel):
    """Base of every answer schema: keys the schema does not name are ignored, not refused."""

    model_config = ConfigDict(extra="ignore")


def item_keys(n: int) -> list[str]:
    """Short keys F1..Fn used to address the items of a numbered list in an answer."""
    return [f"F{i + 1}" for i in range(n)]


@lru_cache(maxsize=512)
def keyed_schema(name: str, n: int, value: str) -> type[BaseModel]:
    """An object with exactly the keys F1..Fn, each holding ``value``:
    'label' (outcome1/outcome2/neutral), 'verdict' (keep/duplicate/irrelevant) or 'prob' (0..1)."""
    types: dict[str, Any] = {
        "label": (LabelName, ...),
        "verdict": (Verdict, ...),
        "prob": (float, Field(ge=0.0, le=1.0)),
    }
    if value not in types:
        raise ValueError(f"unknown keyed value type {value!r}")
    fields = {key: types[value] for key in item_keys(n)}
    return create_model(f"{name}{n}", __base__=AnswerModel, **fields)


def _choice_field(options: tuple[str, ...], max_items: int, min_items: int = 0) -> Any:
    # Bounds and allowed values go to the server; validation accepts any list of strings, and the
    # stage discards (and counts) what was not offered.
    return Field(
        ...,
        json_schema_extra={
            "items": {"type": "string", "enum": list(options)},
            "minItems": min_items,
            "maxItems": max_items,
        },
    )


@lru_cache(maxsize=512)
def choice_list_schema(name: str, field: str, options: tuple[str, ...]) -> type[BaseModel]:
    """``{field: [strings]}``; the server is told the allowed strings, validation accepts any."""
    return create_model(name, __base__=AnswerModel, **{field: (list[str], _choice_field(options, len(options)))})


@lru_cache(maxsize=256)
def text_list_schema(name: str, field: str, max_items: int, max_chars: int, min_items: int = 1) -> type[BaseModel]:
    """``{field: [strings]}``. Bounds go to the server (an unbounded list makes small models repeat
    themselves until the token limit); validation only needs a list of at least ``min_items``
    non-empty strings, and the stage trims and filters what it gets."""
    extra = {"items": {"type": "string", "minLength": 1, "maxLength": max_chars}, "minItems": min_items,
             "maxItems": max_items}
    return create_model(name, __base__=AnswerModel,
                        **{field: (list[str], Field(..., min_length=min_items, json_schema_extra=extra))})


@lru_cache(maxsize=256)
def latent_partition_schema(options: tuple[str, ...], max_latents: int) -> type[BaseModel]:
    group = create_model(
        "LatentGroup", __base__=AnswerModel,
        name=(str, Field(min_length=1, json_schema_extra={"maxLength": 40})),
        factors=(list[str], _choice_field(options, len(options), min_items=1)),
    )
    return create_model("LatentPartition", __base__=AnswerModel,
                        latents=(list[group], Field(min_length=1, json_schema_extra={"maxItems": max_latents})))  # type: ignore[valid-type]


class LatentPair(AnswerModel):
    p_outcome1: float = Field(ge=0.0, le=1.0, description="P(concept leans to outcome 1 | outcome 1)")
    p_outcome2: float = Field(ge=0.0, le=1.0, description="P(concept leans to outcome 1 | outcome 2)")


@lru_cache(maxsize=256)
def latent_params_schema(n: int) -> type[BaseModel]:
    fields = {f"L{i + 1}": (LatentPair, ...) for i in range(n)}
    return create_model(f"LatentParams{n}", __base__=AnswerModel, **fields)


@lru_cache(maxsize=256)
def theme_schema(options: tuple[str, ...]) -> type[BaseModel]:
    removal = create_model(
        "Redundant", __base__=AnswerModel,
        factor=(str, Field(json_schema_extra={"enum": list(options)})),
        same_as=(str, Field(json_schema_extra={"enum": list(options)})),
    )
    return create_model(
        "ThemeAndPruning", __base__=AnswerModel,
        theme=(str, Field(min_length=1, json_schema_extra={"maxLength": 40})),
        redundant=(list[removal], Field(..., json_schema_extra={"maxItems": max(0, len(options) - 1)})),  # type: ignore[valid-type]
    )


def example_strings(prompt: PromptSpec) -> frozenset[str]:
    """Every string inside the prompt's few-shot answers, case-folded.

    Small models sometimes answer with the example instead of the task; stages use this to
    recognise such echoes.
    """
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, str):
            found.add(" ".join(node.casefold().split()))
        elif isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for ex in prompt.examples:
        answer = ex.answer if isinstance(ex.answer, str) else ex.answer.model_dump_json()
        try:
            walk(json.loads(answer))
        except json.JSONDecodeError:
            walk(answer)
    return frozenset(found)


def numbered(items: list[str], keys: bool = False) -> str:
    """Render items one per line, numbered 1..n or keyed F1..Fn."""
    if keys:
        return "\n".join(f"{k}: {t}" for k, t in zip(item_keys(len(items)), items, strict=True))
    return "\n".join(f"{i + 1}. {t}" for i, t in enumerate(items))
