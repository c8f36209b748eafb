"""BIRD's verbal scale: parsing answers and reconciling the two outcomes' judgements."""

from __future__ import annotations

import pytest

from anchor.bird.verbal import TARGET, VerbalLevel, VerbalParseError, mirror, parse_level, reconcile

VL, L, SL, N = VerbalLevel.VERY_LIKELY, VerbalLevel.LIKELY, VerbalLevel.SOMEWHAT_LIKELY, VerbalLevel.NEUTRAL
SU, U, VU = VerbalLevel.SOMEWHAT_UNLIKELY, VerbalLevel.UNLIKELY, VerbalLevel.VERY_UNLIKELY
ALL = [VL, L, SL, N, SU, U, VU]


@pytest.mark.parametrize(("answer", "level"), [
    ("very likely", VL), ("Very Likely", VL), ("VERY_UNLIKELY", VU), ("somewhat-likely", SL),
    ("It is very unlikely.", VU), ("Outcome 1: Likely", L), ("  unlikely ", U), ("Neutral", N),
    ("somewhat\nunlikely", SU),
])
def test_default_parser_is_case_insensitive_and_tolerant(answer, level):
    assert parse_level(answer) == level


@pytest.mark.parametrize("answer", ["probable", "", "maybe", "50%", "likelihood unknown"])
def test_out_of_scale_answer_is_a_clear_error(answer):
    with pytest.raises(VerbalParseError, match="names no level of the verbal scale"):
        parse_level(answer)


def test_two_different_levels_are_ambiguous():
    with pytest.raises(VerbalParseError, match=r"several levels .*likely, unlikely"):
        parse_level("likely or unlikely")


def test_original_parser_is_case_sensitive_and_defaults_to_neutral():
    # The reference parser only knows the capitalised spellings and falls back to neutral.
    assert parse_level("Very likely", case_sensitive=True) == VL
    assert parse_level("very likely", case_sensitive=True) == N
    assert parse_level("probable", case_sensitive=True) == N
    # First hit in its fixed order: 'Unlikely' is tested before 'Likely'.
    assert parse_level("Likely, not Unlikely", case_sensitive=True) == U


def test_targets_are_birds_numbers():
    assert [TARGET[level] for level in ALL] == [1.0, 0.8, 0.6, 0.5, 0.4, 0.2, 0.0]


@pytest.mark.parametrize("level", ALL)
def test_mirrored_answers_are_kept_by_both_rules(level):
    for rule in ("balanced", "original"):
        r = reconcile(level, mirror(level), rule)
        assert (r.outcome1, r.outcome2, r.target, r.changed) == (level, mirror(level), TARGET[level], False)


@pytest.mark.parametrize(("o1", "o2", "balanced", "original"), [
    (VL, L, 0.8, 0.2),    # the reference rule flips this one
    (VU, U, 0.2, 0.8),    # and this one
    (VL, N, 0.8, 1.0),    # a neutral answer disagrees: one level softer (the reference keeps O1's)
    (N, VU, 0.8, 0.5),    # the reference reads the target from O1 alone
    (L, L, 0.5, 0.5),     # equal answers contradict each other
    (SL, SL, 0.5, 0.5),
    (L, VL, 0.2, 0.8),    # O2 judged more likely: the balanced rule favours O2
    (VL, U, 0.8, 0.8),    # agree in direction, differ in strength
    (L, SU, 0.6, 0.6),
    (SL, L, 0.4, 0.6),
    (SU, VU, 0.8, 0.4),    # O2 called very unlikely: the stronger answer wins, one level softer
])
def test_reconciliation_rules(o1, o2, balanced, original):
    assert reconcile(o1, o2, "balanced").target == pytest.approx(balanced)
    assert reconcile(o1, o2, "original").target == pytest.approx(original)


@pytest.mark.parametrize("o1", ALL)
@pytest.mark.parametrize("o2", ALL)
def test_balanced_rule_is_symmetric_and_complementary(o1, o2):
    r = reconcile(o1, o2, "balanced")
    swapped = reconcile(o2, o1, "balanced")
    assert r.outcome2 == mirror(r.outcome1)
    assert swapped.target == pytest.approx(1.0 - r.target)


@pytest.mark.parametrize("o2", ALL)
def test_balanced_rule_is_monotone_in_each_answer(o2):
    # Raising O1's answer never lowers the target; raising O2's never raises it.
    up = [reconcile(o1, o2, "balanced").target for o1 in reversed(ALL)]
    assert up == sorted(up)
    down = [reconcile(o2, o1, "balanced").target for o1 in reversed(ALL)]
    assert down == sorted(down, reverse=True)
