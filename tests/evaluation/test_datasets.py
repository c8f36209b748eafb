"""Dataset loaders: the bundled files, their reading, and the errors broken files produce."""

from __future__ import annotations

import collections
import hashlib
import json
import pickle
import re
from importlib import resources
from pathlib import Path

import pytest

from anchor.evaluation.datasets import (
    DATASET_NAMES,
    FACTCHECK_FILES,
    DatasetError,
    DatasetWarning,
    DecisionInstance,
    PairwiseInstance,
    balance_outcome_order,
    bundled_file,
    group_by_scenario,
    is_factcheck_dataset,
    load_dataset,
    load_decision,
    load_factcheck,
    load_factcheck_data,
    load_pairwise,
    negate_claim,
    repair_text,
    scenario_key,
)
from anchor.types import Scenario

# --------------------------------------------------------------------------- bundled data


def test_bundled_files_live_in_the_package_and_match_provenance() -> None:
    package_dir = Path(str(resources.files("anchor")))
    provenance = (package_dir / "data" / "PROVENANCE.md").read_text(encoding="utf-8")
    for name in DATASET_NAMES:
        res = bundled_file(name)
        path = Path(str(res))
        assert package_dir in path.parents, path
        digest = hashlib.sha256(res.read_bytes()).hexdigest()
        assert digest in provenance, f"{path.name}: sha256 {digest} not recorded in PROVENANCE.md"
    companion = package_dir / "data" / "bird" / "common2sense_human_annotation.json"
    assert hashlib.sha256(companion.read_bytes()).hexdigest() in provenance


def test_pairwise_bundled_counts_and_reading() -> None:
    rows = load_pairwise()
    assert len(rows) == 350
    assert all(isinstance(r, PairwiseInstance) for r in rows)
    assert collections.Counter(r.human for r in rows) == {1: 154, 2: 153, 3: 43}
    assert collections.Counter(r.gold for r in rows) == {1: 194, 2: 156}
    assert len(group_by_scenario(rows)) == 175
    # First CSV row: gold_statement is statement_2 ("... showers instead of baths"), human says 1.
    first = rows[0]
    assert first.id == "common2sense-pairwise:0"
    assert first.gold == 2
    assert first.gold_outcome == (
        "Jennifer wants to stay as hygienic as possible, so she takes showers instead of baths."
    )
    assert first.human == 1
    assert first.condition2 == "Jennifer understands that showers efficiently rinse off dirt and sweat."


def test_common2sense_bundled_counts_and_reading() -> None:
    inst = load_decision("common2sense")
    assert len(inst) == 3822
    assert len(group_by_scenario(inst)) == 216
    assert collections.Counter(i.label for i in inst) == {1: 1983, 2: 1839}
    # Entry 0 has 9 added_information sentences, then its oppo_added_information ones.
    assert inst[0].id == "common2sense:0:0"
    assert inst[0].condition == "The cup in question is small and lightweight."
    assert inst[0].label == 1
    assert inst[0].gold_outcome.startswith("It would be easier for one person to carry the cup")
    assert inst[9].id == "common2sense:0:9"
    assert inst[9].condition == "The cup in question is extremely large and heavy."
    assert inst[9].label == 2
    assert inst[9].gold_outcome.startswith("It would be easier for six people")


def test_plasma_bundled_counts() -> None:
    inst = load_decision("plasma")
    assert len(inst) == 1395
    groups = group_by_scenario(inst)
    assert len(groups) == 279
    assert {len(g) for g in groups.values()} == {5}
    assert {i.label for i in inst} == {1}  # every bundled Plasma label is "Statement 1"
    # Plasma statements carry a trailing space in the file; Scenario strips it.
    assert inst[0].scenario.outcome1 == (
        "You would complete the yoga teacher training program without making any adjustments for your injury."
    )


def test_today_bundled_counts_and_repairs() -> None:
    inst = load_decision("today")
    assert len(inst) == 1000
    assert {i.label for i in inst} == {1}
    assert len({i.id for i in inst}) == 1000  # 12 duplicated entries still get distinct ids
    # 1000 entries, 12 exact duplicates; after repair entry 227 equals entry 232.
    assert len(group_by_scenario(inst)) == 984
    raw = load_decision("today", repair=False)
    assert len(group_by_scenario(raw)) == 985

    assert inst[633].id == "today:633:0"
    assert "I’m settled and don’t need them" in inst[633].condition
    assert "鈥" in raw[633].condition
    assert not any("鈥" in i.condition for i in inst)

    assert inst[811].scenario.outcome1 == "The other car had a green light starts before Eric ran a red light"
    assert "<font" in raw[811].scenario.outcome1
    assert not any("<" in i.scenario.outcome1 + i.scenario.outcome2 for i in inst)


def test_factcheck_bundled_sample() -> None:
    inst = load_factcheck()
    assert len(inst) == 12
    assert collections.Counter(i.label for i in inst) == {2: 9, 1: 3}
    assert {i.dataset for i in inst} == {"factcheck"}
    second = inst[1]
    assert second.id == "factcheck:1"
    assert second.label == 1
    assert second.scenario.text == ""
    claim = "viral load is a dynamic unifying correlate of covid-19 severity and mortality"
    assert second.scenario.outcome1 == f"Saliva {claim}."
    assert second.scenario.outcome2 == f"It is not true that saliva {claim}."
    raw = json.loads(bundled_file("factcheck").read_text(encoding="utf-8").splitlines()[1])
    assert len(raw["evidence"]) == 5
    assert second.condition == " ".join(raw["evidence"])  # the five sentences joined by single spaces
    assert second.condition.startswith("Saliva viral load correlates with key immunological markers")


@pytest.mark.parametrize(("name", "rows", "supported", "claim_chars", "condition_chars"), [
    ("cnn", 558, 501, 304.6, 2886.0),
    ("xsum", 558, 285, 128.6, 1899.8),
    ("expertqa", 669, 509, 168.2, 921.6),
    ("covid", 12, 3, 83.8, 497.6),
])
def test_bundled_factcheck_sets(name: str, rows: int, supported: int, claim_chars: float,
                                condition_chars: float) -> None:
    """Counts, balance and mean lengths as stated in PROVENANCE.md; no row of the bundled files is skipped."""
    data = load_factcheck_data(dataset=name)
    assert data.skipped == [] and data.rows == rows and is_factcheck_dataset(name)
    assert collections.Counter(i.label for i in data.instances) == {1: supported, 2: rows - supported}
    assert [i.id for i in data.instances[:2]] == [f"{name}:0", f"{name}:1"]
    assert {i.dataset for i in data.instances} == {name} and {i.scenario.text for i in data.instances} == {""}
    mean_claim = sum(len(i.scenario.outcome1) for i in data.instances) / rows
    mean_condition = sum(len(i.condition) for i in data.instances) / rows
    assert (round(mean_claim, 1), round(mean_condition, 1)) == (claim_chars, condition_chars)
    assert bundled_file(name).name == FACTCHECK_FILES[name]


def test_aggrefact_documents_are_the_evidence_lines_joined() -> None:
    raw = json.loads(bundled_file("cnn").read_text(encoding="utf-8").splitlines()[0])
    first = load_factcheck(dataset="cnn")[0]
    assert raw["label"] == "REFUTED" and first.label == 2  # the file is sorted by label: REFUTED first
    assert first.condition == " ".join(" ".join(e.split()) for e in raw["evidence"])
    assert first.scenario.outcome1 == " ".join(raw["claim"].split())


def test_load_dataset_dispatch_and_determinism() -> None:
    sizes = {name: len(load_dataset(name)) for name in DATASET_NAMES}
    assert sizes == {"common2sense-pairwise": 350, "common2sense": 3822, "plasma": 1395, "today": 1000,
                     "factcheck": 12, "cnn": 558, "xsum": 558, "expertqa": 669, "covid": 12}
    assert load_dataset("plasma") == load_dataset("plasma")
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        load_dataset("nope")
    with pytest.raises(ValueError, match="unknown decision dataset"):
        load_decision("factcheck")  # type: ignore[arg-type]


def test_pairwise_scenarios_are_common2sense_scenarios() -> None:
    # Same (scenario, statement, opposite) triples in the same order, so factor spaces built for
    # the decision set can be reused for the pairwise set.
    pairwise = set(group_by_scenario(load_pairwise()))
    decision = set(group_by_scenario(load_decision("common2sense")))
    assert pairwise <= decision


# --------------------------------------------------------------------------- helpers


def test_scenario_key_is_stable_and_order_sensitive() -> None:
    s = Scenario(text="a  scene", outcome1="yes", outcome2="no")
    payload = json.dumps(["a scene", "yes", "no"], separators=(",", ":")).encode()
    expected = hashlib.sha256(payload).hexdigest()[:16]
    assert scenario_key(s) == expected
    assert re.fullmatch(r"[0-9a-f]{16}", scenario_key(s))
    assert scenario_key(Scenario(text=" a scene ", outcome1="yes ", outcome2="no")) == scenario_key(s)
    assert scenario_key(s.swapped()) != scenario_key(s)
    assert scenario_key(Scenario(text="", outcome1="yes", outcome2="no")) != scenario_key(s)


def test_group_by_scenario_keeps_first_seen_order() -> None:
    a = Scenario(text="A", outcome1="x", outcome2="y")
    b = Scenario(text="B", outcome1="x", outcome2="y")
    items = [DecisionInstance(id=f"t:{i}", dataset="t", scenario=s, condition="c", label=1)
             for i, s in enumerate([b, a, b])]
    groups = group_by_scenario(items)
    assert list(groups) == [scenario_key(b), scenario_key(a)]
    assert [i.id for i in groups[scenario_key(b)]] == ["t:0", "t:2"]


def test_balance_outcome_order_flips_whole_scenarios() -> None:
    original = load_decision("plasma")
    balanced = balance_outcome_order(original)
    assert [i.id for i in balanced] == [i.id for i in original]
    for before, after in zip(original, balanced, strict=True):
        assert after.gold_outcome == before.gold_outcome
        assert after.condition == before.condition
    counts = collections.Counter(i.label for i in balanced)
    assert counts[1] + counts[2] == 1395 and 500 < counts[2] < 900
    assert len(group_by_scenario(balanced)) == 279  # all instances of a scenario swap together
    pairs = balance_outcome_order(load_pairwise())
    assert [p.gold_outcome for p in pairs] == [p.gold_outcome for p in load_pairwise()]


def test_negate_claim() -> None:
    assert negate_claim("Saliva viral load is high.") == "It is not true that saliva viral load is high."
    assert negate_claim("COVID-19 spreads by air") == "It is not true that COVID-19 spreads by air."
    assert negate_claim("mRNA vaccines work") == "It is not true that mRNA vaccines work."
    assert negate_claim("  Pet   dog  ") == "It is not true that pet dog."
    with pytest.raises(ValueError):
        negate_claim(" . ")


def test_repair_text() -> None:
    assert repair_text("I鈥檓 here") == "I’m here"
    assert repair_text('light <b><font color="orange">starts before') == "light starts before"
    assert repair_text("中文文本") == "中文文本"  # genuine CJK is not touched
    assert repair_text("a < b and c > d") == "a < b and c > d"


# --------------------------------------------------------------------------- broken files


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _plasma_entry(**over: object) -> dict[str, object]:
    entry: dict[str, object] = {
        "scenario": "bake bread",
        "statement": "You would use yeast.",
        "opposite_statement": "You would use sourdough starter.",
        "additional_sentences": ["You are in a hurry.", "You have no starter."],
        # The second label checks that case and surrounding spaces are ignored.
        "additional_sentence_label": {"You are in a hurry.": "Statement 1",
                                      "You have no starter.": "statement 2 "},
    }
    entry.update(over)
    return entry


def test_custom_plasma_file_and_label_reading(tmp_path: Path) -> None:
    path = _write(tmp_path, "mine.json", json.dumps([_plasma_entry()], indent=2))
    inst = load_decision("plasma", path)
    assert [(i.id, i.label) for i in inst] == [("plasma:0:0", 1), ("plasma:0:1", 2)]
    assert inst[1].gold_outcome == "You would use sourdough starter."
    assert load_dataset("plasma", str(path)) == inst


def test_not_json(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.json", '[\n  {"scenario": "x",\n')
    with pytest.raises(DatasetError) as err:
        load_decision("plasma", path)
    assert str(path) in str(err.value)
    assert "line 3" in str(err.value) and "not valid JSON" in str(err.value)


def test_wrong_top_level_and_empty_array(tmp_path: Path) -> None:
    path = _write(tmp_path, "obj.json", '{"scenario": "x"}')
    with pytest.raises(DatasetError, match="top level is an object"):
        load_decision("today", path)
    path = _write(tmp_path, "empty.json", "[]")
    with pytest.raises(DatasetError, match="empty"):
        load_decision("common2sense", path)


def test_json_entry_problems_name_entry_and_line(tmp_path: Path) -> None:
    entries = [
        _plasma_entry(),
        _plasma_entry(statement=""),                                          # empty string
        "not an object",
        _plasma_entry(additional_sentence_label={"You are in a hurry.": "Statement 3",
                                                 "You have no starter.": "Statement 1"}),
    ]
    bad = dict(_plasma_entry())
    del bad["opposite_statement"]
    entries.append(bad)
    path = _write(tmp_path, "p.json", json.dumps(entries, indent=4))
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [n for n, text in enumerate(lines, start=1) if text in ("    {", '    "not an object",')]
    with pytest.raises(DatasetError) as err:
        load_decision("plasma", path)
    e = err.value
    assert e.total == 4 and len(e.problems) == 4
    msg = str(e)
    assert msg.startswith(f"{path}: 4 problems:")
    assert f"entry 1 (line {starts[1]}): 'statement' is empty" in msg
    assert f"entry 2 (line {starts[2]}): expected an object, got a string" in msg
    assert f"entry 3 (line {starts[3]})" in msg and "'Statement 3'" in msg and "not recognised" in msg
    assert f"entry 4 (line {starts[4]}): missing key 'opposite_statement'" in msg
    assert isinstance(e, ValueError)
    assert str(pickle.loads(pickle.dumps(e))) == msg


def test_label_map_must_cover_exactly_the_sentences(tmp_path: Path) -> None:
    entries = [
        _plasma_entry(additional_sentence_label={"You are in a hurry.": "Statement 1"}),
        _plasma_entry(additional_sentence_label={"You are in a hurry.": "Statement 1",
                                                 "You have no starter.": "Statement 1",
                                                 "Something else.": "Statement 2"}),
        _plasma_entry(additional_sentences=[]),
    ]
    path = _write(tmp_path, "p.json", json.dumps(entries))
    with pytest.raises(DatasetError) as err:
        load_decision("plasma", path)
    msg = str(err.value)
    assert "entry 0 (line 1): additional_sentences[1] has no entry in 'additional_sentence_label'" in msg
    assert "entry 1 (line 1): 'additional_sentence_label' has 1 key(s) that are not in" in msg
    assert "entry 2 (line 1): 'additional_sentences' is an empty array" in msg


def test_at_most_ten_problems_are_listed(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.json", json.dumps([_plasma_entry(scenario=" ") for _ in range(12)], indent=1))
    with pytest.raises(DatasetError) as err:
        load_decision("plasma", path)
    assert err.value.total == 12
    assert len(err.value.problems) == 10
    assert "12 problems (first 10 shown)" in str(err.value)
    assert "entry 9 " in str(err.value) and "entry 10 " not in str(err.value)


def test_common2sense_checks(tmp_path: Path) -> None:
    good = {
        "scenario": "Carrying a cup.",
        "statement": "One person carries it more easily.",
        "opposite_statement": "Six people carry it more easily.",
        "added_information": ["The cup is small."],
        "oppo_added_information": ["The cup is huge."],
        "additional_sentence_label": {"The cup is small.": "Statement 1", "The cup is huge.": "Statement 2"},
    }
    contradicting = dict(good, additional_sentence_label={"The cup is small.": "Statement 2"})
    both = dict(good, oppo_added_information=["The cup is small."])
    del both["additional_sentence_label"]  # optional; without it only the overlap is reported
    none = dict(good, added_information=[], oppo_added_information=[])
    same = dict(good, opposite_statement="one person carries it more easily.")
    path = _write(tmp_path, "c.json", json.dumps([good, contradicting, both, none, same]))
    with pytest.raises(DatasetError) as err:
        load_decision("common2sense", path)
    msg = str(err.value)
    assert err.value.total == 4
    assert "entry 1 (line 1): added_information[0] is labelled 'Statement 2'" in msg
    assert "entry 2 (line 1): 1 sentence(s) listed as supporting both statements" in msg
    assert "entry 3 (line 1): no conditions" in msg
    assert "entry 4 (line 1): invalid scenario" in msg and "must differ" in msg
    ok = load_decision("common2sense", _write(tmp_path, "ok.json", json.dumps([good])))
    assert [(i.condition, i.label) for i in ok] == [("The cup is small.", 1), ("The cup is huge.", 2)]


_CSV_HEADER = "scenario,statement_1,statement_2,gold_statement,sentence_1,sentence_2,human_prediction"


def _csv_row(gold: str = "A is better.", human: str = "1", s1: str = "u one", s2: str = "u two") -> str:
    return f"S,A is better.,B is better.,{gold},{s1},{s2},{human}"


def test_custom_pairwise_csv_with_blank_lines_and_crlf(tmp_path: Path) -> None:
    text = "\r\n".join([_CSV_HEADER, _csv_row(), "", _csv_row(gold="B is  better.", human="3")])
    rows = load_pairwise(_write(tmp_path, "p.csv", text))
    assert [(r.id, r.gold, r.human) for r in rows] == [
        ("common2sense-pairwise:0", 1, 1), ("common2sense-pairwise:1", 2, 3),
    ]


def test_pairwise_csv_problems(tmp_path: Path) -> None:
    text = "\n".join([
        _CSV_HEADER,
        _csv_row(),                                  # row 0, line 2: fine
        _csv_row(gold="C is better."),               # row 1, line 3: gold matches neither
        _csv_row(human="4"),                         # row 2, line 4
        _csv_row(s2=" "),                            # row 3, line 5: empty cell
        "S,A is better.,B is better.",               # row 4, line 6: too few fields
        '"multi\nline scenario",A,B,C,u,v,1',        # row 5, lines 7-8: gold matches neither
    ])
    path = _write(tmp_path, "p.csv", text)
    with pytest.raises(DatasetError) as err:
        load_pairwise(path)
    msg = str(err.value)
    assert err.value.total == 5
    assert "row 1 (line 3): gold_statement matches neither statement_1 nor statement_2" in msg
    assert "row 2 (line 4): human_prediction '4' is not 1, 2 or 3" in msg
    assert "row 3 (line 5): empty value in column(s) sentence_2" in msg
    assert "row 4 (line 6): has 3 fields, expected 7" in msg
    assert "row 5 (line 7): gold_statement matches neither" in msg


def test_pairwise_csv_header_and_empty(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"line 1 \(header\): missing column\(s\) human_prediction"):
        header = _CSV_HEADER.replace(",human_prediction", "")
        load_pairwise(_write(tmp_path, "h.csv", header + "\nS,A,B,A,u,v"))
    with pytest.raises(DatasetError, match="the file is empty"):
        load_pairwise(_write(tmp_path, "e.csv", ""))
    with pytest.raises(DatasetError, match="no data rows"):
        load_pairwise(_write(tmp_path, "only.csv", _CSV_HEADER + "\n\n"))


def test_factcheck_custom_file(tmp_path: Path) -> None:
    lines = [
        json.dumps({"claim": "Masks reduce spread.", "label": "SUPPORTED",
                    "evidence": ["Study A.", "", "Study B."], "gold_source": "https://x", "flair": "Preprint"}),
        "",
        "   ",
        json.dumps({"claim": "Garlic cures it", "label": "refutes", "evidence": ["No effect was found."]}),
    ]
    path = _write(tmp_path, "covid_dev.jsonl", "\n".join(lines) + "\n")
    inst = load_factcheck(path)
    assert [(i.id, i.label, i.dataset) for i in inst] == [
        ("covid_dev:0", 1, "covid_dev"), ("covid_dev:1", 2, "covid_dev"),
    ]
    assert inst[0].condition == "Study A. Study B."  # the blank evidence sentence is dropped
    assert inst[1].scenario.outcome2 == "It is not true that garlic cures it."
    custom = load_factcheck(path, dataset="covid", negate=lambda c: f"NOT: {c}")
    assert custom[0].id == "covid:0" and custom[0].scenario.outcome2 == "NOT: Masks reduce spread."
    assert load_dataset("factcheck", path)[0].dataset == "covid_dev"
    assert [i.id for i in load_dataset("covid", path)] == ["covid:0", "covid:1"]


def test_factcheck_bad_rows_are_skipped_and_reported(tmp_path: Path) -> None:
    good = json.dumps({"claim": "C.", "label": "SUPPORTED", "evidence": ["E."]})
    lines = [
        good,                                                                   # line 1, record 0
        "",                                                                     # line 2: blank, no record
        good[:-15],                                                             # line 3: truncated
        json.dumps({"claim": "C.", "label": "NOT ENOUGH INFO", "evidence": ["E."]}),  # line 4
        json.dumps({"claim": "", "label": "REFUTED", "evidence": ["E."]}),      # line 5
        json.dumps({"claim": "C.", "label": "REFUTED", "evidence": []}),        # line 6
        json.dumps(["C.", "REFUTED"]),                                          # line 7
        json.dumps({"claim": "C.", "label": "REFUTED"}),                        # line 8
        json.dumps({"claim": "C.", "label": "REFUTED", "evidence": "E."}),      # line 9: not a list
        "\ufeff" + json.dumps({"claim": "D.", "label": "REFUTED", "evidence": ["E."]}),  # line 10: BOM
        json.dumps({"claim": "C.", "label": "REFUTED", "evidence": ["E.", 3]}),  # line 11
        json.dumps({"claim": "Last.", "label": "REFUTED", "evidence": ["F."]}),  # line 12, record 10
    ]
    path = _write(tmp_path, "f.jsonl", "\n".join(lines))
    data = load_factcheck_data(path)
    assert [(i.id, i.label, i.condition) for i in data.instances] == [("f:0", 1, "E."), ("f:10", 2, "F.")]
    assert data.rows == 11
    assert [(s.line, s.record) for s in data.skipped] == [
        (3, 1), (4, 2), (5, 3), (6, 4), (7, 5), (8, 6), (9, 7), (10, 8), (11, 9),
    ]
    problems = [s.problem for s in data.skipped]
    assert problems[0].startswith("not valid JSON: the line ends too early (truncated?)")
    assert problems[1:] == [
        "label 'NOT ENOUGH INFO' is not recognised (expected SUPPORTED or REFUTED)",
        "'claim' is empty",
        "'evidence' is an empty array",
        "expected an object, got an array",
        "missing key 'evidence'",
        "'evidence' must be an array of strings, got a string",
        "starts with a byte-order mark (U+FEFF); save the file as UTF-8 without BOM",
        "evidence[1] must be a string, got a number",
    ]
    messages = data.skipped_messages()
    assert messages[1] == f"{path}: line 4: {problems[1]}"
    assert data.summary() == f"{path}: 9 of 11 rows skipped (first: line 3: {problems[0]})"
    # The list-returning loader gives the same instances and says that rows were skipped.
    with pytest.warns(DatasetWarning, match=r"9 of 11 rows skipped") as caught:
        assert load_factcheck(path) == data.instances
    assert "line 10: starts with a byte-order mark" in str(caught[0].message)


def test_factcheck_a_bom_starting_the_file_is_skipped_and_bad_utf8_skips_only_its_row(tmp_path: Path) -> None:
    """A UTF-8 byte-order mark at the start of the file is the encoding's mark (Windows editors write one):
    the first row is read, as a cases file's is (anchor.jsonl, the one reader of both)."""
    first = json.dumps({"claim": "A.", "label": "SUPPORTED", "evidence": ["E."]})
    second = json.dumps({"claim": "B.", "label": "REFUTED", "evidence": ["E."]})
    path = _write(tmp_path, "bom.jsonl", b"\xef\xbb\xbf" + first.encode() + b"\n" + second.encode() + b"\n"
                  + b'{"claim": "caf\xe9", "label": "REFUTED", "evidence": ["E."]}\r\n')
    data = load_factcheck_data(path, dataset="covid")
    assert [i.id for i in data.instances] == ["covid:0", "covid:1"]
    assert [(s.line, s.record, s.problem.split(" (")[0]) for s in data.skipped] == [(3, 2, "not valid UTF-8")]


def test_factcheck_file_without_a_usable_row_is_a_one_line_error(tmp_path: Path) -> None:
    lines = [json.dumps({"claim": "", "label": "SUPPORTED", "evidence": ["E."]}), "{not json",
             json.dumps({"claim": "C.", "label": "maybe", "evidence": ["E."]}),
             json.dumps({"claim": "C.", "label": "REFUTED", "evidence": {"a": 1}})]
    path = _write(tmp_path, "bad.jsonl", "\n".join(lines))
    with pytest.raises(DatasetError) as err:
        load_factcheck_data(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: no usable row: all 4 rows were skipped (line 1: 'claim' is empty; line 2: ")
    assert msg.endswith("; ...)")
    with pytest.raises(DatasetError, match="no records"):
        load_factcheck(_write(tmp_path, "blank.jsonl", "\n  \n\n"))
    with pytest.raises(ValueError, match="no bundled fact-checking file named 'nope'"):
        load_factcheck_data(dataset="nope")


def test_full_size_covidfact_format_file_loads_through_a_path(tmp_path: Path) -> None:
    """A file shaped like the public COVIDFACT_dataset.jsonl (4,086 claims, extra keys), not bundled."""
    rows = []
    for k in range(4086):
        rows.append(json.dumps({
            "claim": f"Treatment {k} shortens covid-19 recovery by {k % 9 + 1} days",
            "label": "SUPPORTED" if k % 4 == 0 else "REFUTED",
            "evidence": [f"Trial {k} enrolled {100 + k} patients.", f"Recovery changed by {k % 7} days."],
            "gold_source": f"https://example.org/{k}", "flair": "Preprint",
        }))
    rows[2000] = rows[2000][:-20]  # one damaged row among thousands
    path = _write(tmp_path, "COVIDFACT_dataset.jsonl", "\n".join(rows) + "\n")
    data = load_factcheck_data(path, dataset="covid")
    assert len(data.instances) == 4085 and [s.line for s in data.skipped] == [2001]
    assert data.instances[2000].id == "covid:2001"  # ids keep their record numbers past the skip
    assert collections.Counter(i.label for i in data.instances) == {1: 1021, 2: 3064}
    assert data.instances[5].condition == "Trial 5 enrolled 105 patients. Recovery changed by 5 days."


def test_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.json"
    with pytest.raises(DatasetError, match="cannot read the file") as err:
        load_decision("plasma", missing)
    assert str(missing) in str(err.value)
    path = _write(tmp_path, "latin1.jsonl", b'{"claim": "ok"}\n{"claim": "caf\xe9"}\n')
    with pytest.raises(DatasetError, match=r"no usable row: .*line 2: not valid UTF-8"):
        load_factcheck(path)


def test_condition_emptied_by_repair_is_reported(tmp_path: Path) -> None:
    path = _write(tmp_path, "p.json", json.dumps([_plasma_entry(
        additional_sentences=["<b>"], additional_sentence_label={"<b>": "Statement 1"},
    )]))
    with pytest.raises(DatasetError, match=r"entry 0 \(line 1\): condition 0 is unusable"):
        load_decision("plasma", path)
    assert [i.condition for i in load_decision("plasma", path, repair=False)] == ["<b>"]
