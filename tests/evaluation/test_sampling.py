"""The seeded sampling protocol of the fact-checking sets."""

from __future__ import annotations

import collections
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from anchor.evaluation.datasets import load_factcheck
from anchor.evaluation.datasets.sampling import (
    SampleError,
    SampleRecord,
    draw_sample,
    parse_sample_size,
    sample_instances,
    seeded_order,
)

SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass(frozen=True)
class Item:
    id: str


def _ids(items: list) -> list[str]:
    return [i.id for i in items]


def test_same_seed_same_sample_other_seed_other_sample() -> None:
    cnn = load_factcheck(dataset="cnn")
    first = _ids(sample_instances(cnn, 100, 42))
    assert first == _ids(sample_instances(cnn, 100, 42)) == _ids(sample_instances(list(cnn), 100, 42))
    assert len(first) == len(set(first)) == 100
    other = _ids(sample_instances(cnn, 100, 43))
    assert other != first and len(set(other) & set(first)) < 60
    # Not a prefix of the (label-sorted) file: sampled records spread over the whole file.
    records = sorted(int(i.split(":")[1]) for i in first)
    assert records != list(range(100)) and records[-1] > 450


def test_sample_is_the_seeded_order_independent_of_input_order() -> None:
    items = [Item(f"d:{k}") for k in range(50)]
    order = seeded_order(_ids(items), 42)
    assert sorted(order) == list(range(50)) and order != list(range(50))
    chosen, record = draw_sample(items, 10, 42)
    assert _ids(chosen) == [f"d:{k}" for k in order[:10]] == record.ids
    # Nested: a smaller sample is the prefix of a larger one, and 'all' continues the same order.
    assert _ids(sample_instances(items, 4, 42)) == record.ids[:4]
    assert _ids(sample_instances(items, "all", 42))[:10] == record.ids
    # The shuffle uses only Random(seed).random(), whose sequence Python keeps fixed across versions.
    rng = random.Random(42)
    expected = list(range(50))
    for i in range(49, 0, -1):
        j = int(rng.random() * (i + 1))
        expected[i], expected[j] = expected[j], expected[i]
    assert order == expected


def test_sample_is_the_same_in_another_process_with_another_hash_seed() -> None:
    code = ("from anchor.evaluation.datasets import load_factcheck as l; "
            "from anchor.evaluation.datasets.sampling import sample_instances as s; "
            "print(','.join(i.id for i in s(l(dataset='xsum'), 100, 42)))")
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    here = [i.id for i in sample_instances(load_factcheck(dataset="xsum"), 100, 42)]
    assert out.stdout.strip().split(",") == here


def test_cnn_balance_is_roughly_preserved() -> None:
    cnn = load_factcheck(dataset="cnn")
    share = collections.Counter(i.label for i in cnn)[2] / len(cnn)  # 57 / 558 refuted
    for seed in (42, 0, 1, 2, 3):
        refuted = collections.Counter(i.label for i in sample_instances(cnn, 100, seed))[2]
        assert abs(refuted / 100 - share) < 0.08, (seed, refuted)
        assert refuted > 0  # balanced accuracy needs both classes


def test_all_and_oversized_requests() -> None:
    covid = load_factcheck(dataset="covid")
    everything, record = draw_sample(covid, "all", 42)
    assert sorted(_ids(everything)) == sorted(_ids(covid)) and record.note is None
    assert record.requested == "all" and record.population == 12
    capped, record = draw_sample(covid, 100, 42)
    assert _ids(capped) == _ids(everything)
    assert record.note == "asked for a sample of 100 but only 12 usable instances exist; all 12 are used"


def test_record_round_trip_and_select() -> None:
    cnn = load_factcheck(dataset="cnn")
    chosen, record = draw_sample(cnn, 5, 42)
    again = SampleRecord.model_validate_json(record.model_dump_json())
    assert again == record and again.select(cnn) == chosen
    with pytest.raises(SampleError, match=r"1 sampled id\(s\) are not in the data"):
        again.select([i for i in cnn if i.id != record.ids[2]])


@pytest.mark.parametrize(("text", "expected"), [("100", 100), (" ALL ", "all"), (7, 7)])
def test_parse_sample_size(text: str | int, expected: object) -> None:
    assert parse_sample_size(text) == expected


@pytest.mark.parametrize("bad", ["0", "-3", "ten", "", True, 0])
def test_bad_sample_sizes(bad: object) -> None:
    with pytest.raises(SampleError, match="sample size must be"):
        parse_sample_size(bad)  # type: ignore[arg-type]


def test_negative_seeds_are_refused_not_folded_onto_positive_ones() -> None:
    items = [Item(f"d:{k}") for k in range(20)]
    for bad in (-1, -42, True, 1.5):
        with pytest.raises(SampleError, match="sample seed must be a whole number >= 0"):
            draw_sample(items, 5, bad)  # type: ignore[arg-type]
    assert draw_sample(items, 5, 0)[1].seed == 0


def test_cannot_sample_nothing_or_repeated_ids() -> None:
    with pytest.raises(SampleError, match="no instances"):
        draw_sample([], 3)
    with pytest.raises(SampleError, match="repeated: x:1"):
        draw_sample([Item("x:1"), Item("x:2"), Item("x:1")], 2)
