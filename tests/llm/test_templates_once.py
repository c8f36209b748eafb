"""What is the same for every request of a template is built once: the inlined answer schema per
class and the system and few-shot turns per prompt; what a caller gets is still its own."""

from __future__ import annotations

import gc
import weakref

from pydantic import BaseModel, Field, create_model

from anchor.llm.prompt import Example, PromptSpec
from anchor.llm.structured import _build_inline_schema, inline_schema
from anchor.prompts.schemas import AnswerModel, keyed_schema


class Inner(BaseModel):
    name: str = Field(title="Name")


class Outer(BaseModel):
    items: list[Inner]
    best: Inner | None = None


def test_inline_schema_is_built_once_per_class_and_matches_a_fresh_build() -> None:
    first = inline_schema(Outer)
    assert inline_schema(Outer) is first
    assert first == _build_inline_schema(Outer)
    assert "$defs" not in first and "title" not in str(first)
    # Classes made by the schema factories get their own entry, each equal to a fresh build.
    for n in (1, 3):
        cls = keyed_schema("Labels", n, "label")
        assert inline_schema(cls) is inline_schema(cls) and inline_schema(cls) == _build_inline_schema(cls)


def test_inline_schema_does_not_keep_a_class_alive() -> None:
    cls = create_model("Passing", __base__=AnswerModel, x=(int, ...))
    inline_schema(cls)
    ref = weakref.ref(cls)
    del cls
    gc.collect()
    assert ref() is None


class Reply(BaseModel):
    answer: str


def test_render_builds_the_fixed_turns_once_and_hands_out_fresh_messages() -> None:
    spec = PromptSpec(stage="t", system="Be brief.", user="Q: {q}", schema=Reply,
                      examples=(Example(user="Q: one", answer=Reply(answer="1")), Example(user="Q: two", answer="{}")))
    first = spec.render(q="a")
    assert first == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Q: one"},
                     {"role": "assistant", "content": '{"answer":"1"}'}, {"role": "user", "content": "Q: two"},
                     {"role": "assistant", "content": "{}"}, {"role": "user", "content": "Q: a"}]
    first[0]["content"] = "changed by a caller"
    second = spec.render(q="b")
    assert second[0] == {"role": "system", "content": "Be brief."}
    assert second[-1] == {"role": "user", "content": "Q: b"}
    assert all(a is not b for a, b in zip(first, second, strict=True))
