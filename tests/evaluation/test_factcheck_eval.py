"""`anchor eval` on the fact-checking sets: the paper's seeded sample, skipped rows, the support
decision at the threshold, and long documents cut to a small context, against a real local server."""

from __future__ import annotations

import json
import math
import re
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.evaluation.datasets import DatasetWarning, load_factcheck_set, scenario_key
from anchor.evaluation.datasets.sampling import SampleRecord, draw_sample
from anchor.rundir import SCHEMA_VERSION, RunDirectory
from anchor.rundir.records import MetricsReport, Prediction, RunConfig
from tests.fakeserver import FakeOpenAIServer

runner = CliRunner()


def eval_args(server: FakeOpenAIServer, tmp_path: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"), "--out", str(out),
            "--json", *extra]


def invoke(args: list[str]):
    return runner.invoke(app, args)


def predictions(out: Path) -> list[Prediction]:
    return [Prediction.model_validate_json(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def metrics(out: Path) -> MetricsReport:
    return MetricsReport.model_validate_json((out / "metrics.json").read_text())


def sample_record(out: Path) -> SampleRecord:
    record = RunDirectory(out).read_sample()  # the record, without the file's schema_version
    assert record is not None and json.loads((out / "sample.json").read_text())["schema_version"] == SCHEMA_VERSION
    return record


def write_claims(path: Path, rows: list[dict[str, object] | str]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


CLAIM = re.compile(r"^Outcome 1: (.*)$", re.MULTILINE)


def scripted(p_claim: dict[str, float]):
    """A responder that answers every baseline prompt with the scripted P(claim) of its claim."""

    def respond(body: dict[str, object]) -> str:
        user = body["messages"][-1]["content"]  # type: ignore[index]
        p = p_claim[CLAIM.search(user).group(1)]  # type: ignore[union-attr]
        if "Reason briefly" in user:
            return json.dumps({"reasoning": "The evidence was weighed.", "probability": p})
        return json.dumps({"probability": p})

    return respond


# --------------------------------------------------------------------------- the sample


def test_cnn_sample_is_seeded_recorded_and_shared_by_methods_and_resume(tmp_path: Path) -> None:
    expected = draw_sample(load_factcheck_set("cnn").instances, 100, 42)[1]
    # Pinned: the sample of the bundled file for seed 42 must not change between versions.
    assert expected.ids[:5] == ["cnn:409", "cnn:9", "cnn:162", "cnn:212", "cnn:274"]
    # Scripted P(claim) for the first three: cnn:409 (supported) 0.95 -> support, right; cnn:9
    # (refuted) 0.93 -> support, wrong; cnn:162 (supported) 0.5 -> not support, wrong.
    claims = {i.id: i.scenario.outcome1 for i in load_factcheck_set("cnn").instances}
    p_claim = {claims["cnn:409"]: 0.95, claims["cnn:9"]: 0.93, claims["cnn:162"]: 0.5}
    with FakeOpenAIServer(responder=scripted(p_claim)) as server:
        for method in ("vanilla", "cot"):
            out = tmp_path / method
            result = invoke(eval_args(server, tmp_path, out, "--dataset", "cnn", "--method", method, "--limit", "3"))
            assert result.exit_code == 0, result.output
        asked = server.completions
        again = invoke(eval_args(server, tmp_path, tmp_path / "vanilla", "--dataset", "cnn", "--method", "vanilla",
                                 "--limit", "3"))
        assert again.exit_code == 0, again.output
        assert server.completions == asked  # the resume found every instance answered
    for method in ("vanilla", "cot"):
        out = tmp_path / method
        assert sample_record(out) == expected  # 100 ids of 558, seed 42, in the seeded order
        config = RunConfig.model_validate_json((out / "config.json").read_text())
        assert (config.kind, config.sample, config.sample_seed, config.limit) == ("factcheck", 100, 42, 3)
        # --limit takes the first 3 of the sample, not of the (label-sorted) file.
        assert sorted(p.id for p in predictions(out)) == sorted(expected.ids[:3])
        m = metrics(out)
        assert m.n_instances == 3 and m.kind == "factcheck"
        assert m.sample == {"seed": 42, "requested": 100, "population": 558, "size": 100, "used": 3,
                            "file": "sample.json", "note": None}
        assert m.data is not None and (m.data["rows"], m.data["usable"], m.data["skipped"]) == (558, 558, 0)
        # Recall of the supported claims 1/2, of the refuted one 0: balanced accuracy 1/4, accuracy 1/3.
        assert m.mean["balanced_accuracy"] == pytest.approx(0.25) and m.mean["accuracy"] == pytest.approx(1 / 3)
        assert m.mean["coverage"] == 1.0
        assert {p.id: p.prediction for p in predictions(out)} == {"cnn:409": 1, "cnn:9": 1, "cnn:162": 2}
        assert any("sample of 100 of 558" in n and "first 3" in n for n in m.notes)


def test_sample_all_other_seed_and_a_sample_larger_than_the_file(tmp_path: Path) -> None:
    covid = load_factcheck_set("covid").instances
    with FakeOpenAIServer(deterministic=True) as server:
        everything = tmp_path / "all"
        assert invoke(eval_args(server, tmp_path, everything, "--dataset", "covid", "--method", "vanilla",
                                "--sample", "all", "--sample-seed", "7")).exit_code == 0
        default = tmp_path / "default"
        assert invoke(eval_args(server, tmp_path, default, "--dataset", "covid", "--method", "vanilla")).exit_code == 0
        refused = invoke(eval_args(server, tmp_path, default, "--dataset", "covid", "--method", "vanilla",
                                   "--sample", "5"))
    rec = sample_record(everything)
    assert rec == draw_sample(covid, "all", 7)[1]
    assert (rec.requested, rec.population, len(rec.ids)) == ("all", 12, 12)
    assert sorted(rec.ids) == sorted(i.id for i in covid) and rec.ids != [i.id for i in covid]
    assert metrics(everything).n_instances == 12
    # The default asks for the paper's 100: the 12-row sample is used whole, and the run says so.
    small = sample_record(default)
    assert (small.requested, small.seed, small.ids) == (100, 42, draw_sample(covid, 100, 42)[1].ids)
    assert any("asked for a sample of 100 but only 12 usable instances exist" in n for n in metrics(default).notes)
    # The sample is part of the run's identity.
    assert refused.exit_code == 2 and "sample was 100, now 5" in refused.output


@pytest.mark.parametrize(("args", "words"), [
    (["--sample", "0"], "sample size must be at least 1 (or 'all'), got 0"),
    (["--sample=-3"], "sample size must be at least 1 (or 'all'), got -3"),
    (["--sample", "abc"], "sample size must be a positive whole number or 'all', got 'abc'"),
    (["--dataset", "today", "--sample-seed", "3"], "--sample-seed only applies to a sample"),
    # random.Random(-1) is random.Random(1): a negative seed would draw seed 1's sample, recorded as -1.
    (["--sample-seed", "-1"], "--sample-seed must be a whole number >= 0, got -1"),
    (["--sample", "4", "--sample-seed=-7"], "--sample-seed must be a whole number >= 0, got -7"),
])
def test_bad_sample_options_are_one_line_errors(tmp_path: Path, args: list[str], words: str) -> None:
    dataset = [] if "--dataset" in args else ["--dataset", "cnn"]
    result = invoke(["eval", *dataset, "--method", "vanilla", "--out", str(tmp_path / "o"), *args])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], result.output
    assert "--sample" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "o").exists()


def test_a_sample_on_a_set_scored_whole_by_default(tmp_path: Path) -> None:
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "today"
        assert invoke(eval_args(server, tmp_path, out, "--dataset", "today", "--method", "vanilla",
                                "--sample", "4", "--sample-seed", "3", "--limit", "2")).exit_code == 0
        whole = tmp_path / "whole"
        assert invoke(eval_args(server, tmp_path, whole, "--dataset", "today", "--method", "vanilla",
                                "--limit", "2")).exit_code == 0
    from anchor.evaluation.datasets import load_dataset

    today = load_dataset("today")
    assert sorted(p.id for p in predictions(out)) == sorted(draw_sample(today, 4, 3)[1].ids[:2])
    assert sorted(p.id for p in predictions(whole)) == sorted(i.id for i in today[:2])  # no sample.json
    assert not (whole / "sample.json").exists() and metrics(whole).sample is None


# --------------------------------------------------------------------------- the data file


def test_covidfact_format_file_of_thousands_of_rows_with_skipped_rows(tmp_path: Path) -> None:
    rows: list[dict[str, object] | str] = [{
        "claim": f"Drug {k} shortens covid-19 recovery by {k % 9 + 1} days",
        "label": "SUPPORTED" if k % 4 == 0 else "REFUTED",
        "evidence": [f"Trial {k} enrolled {100 + k} patients.", f"Recovery changed by {k % 7} days."],
        "gold_source": f"https://example.org/{k}", "flair": "Preprint",
    } for k in range(3000)]
    rows[10] = {"claim": "", "label": "SUPPORTED", "evidence": ["e"]}
    rows[20] = '{"claim": "cut short", "label": "REF'
    rows[30] = "\ufeff" + json.dumps({"claim": "x", "label": "SUPPORTED", "evidence": ["e"]})
    rows[40] = {"claim": "y", "label": "MAYBE", "evidence": ["e"]}
    rows[50] = {"claim": "z", "label": "REFUTED", "evidence": "not a list"}
    data = write_claims(tmp_path / "COVIDFACT_dataset.jsonl", rows)
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "covid"
        # Skipped rows are counted in metrics.json (below), not warned about by eval or report.
        with warnings.catch_warnings():
            warnings.simplefilter("error", DatasetWarning)
            result = invoke(eval_args(server, tmp_path, out, "--dataset", "covid", "--data", str(data),
                                      "--method", "vanilla", "--limit", "4"))
            assert result.exit_code == 0, result.output
            report = invoke(["report", str(out), "--out", str(tmp_path / "report")])
        assert report.exit_code == 0, report.output
    loaded = load_factcheck_set("covid", data)
    assert sample_record(out) == draw_sample(loaded.instances, 100, 42)[1]
    assert sorted(p.id for p in predictions(out)) == sorted(sample_record(out).ids[:4])
    m = metrics(out)
    assert m.data is not None
    assert (m.data["rows"], m.data["usable"], m.data["skipped"]) == (3000, 2995, 5)
    assert [(r["line"], r["problem"].split(" (")[0]) for r in m.data["skipped_rows"]] == [
        (11, "'claim' is empty"), (21, "not valid JSON: the line ends too early"),
        (31, "starts with a byte-order mark"), (41, "label 'MAYBE' is not recognised"),
        (51, "'evidence' must be an array of strings, got a string")]
    note = next(n for n in m.notes if "rows of" in n)
    assert note.startswith(f"5 of 3000 rows of {data} were skipped") and "line 11: 'claim' is empty" in note
    md = (tmp_path / "report" / "report.md").read_text()
    assert f"5 of 3000 rows of {data} were skipped" in md and "sample of 100 of 2995" in md


# --------------------------------------------------------------------------- the decision


CLAIMS = {  # claim -> (label, scripted P(claim))
    "The bridge opened in 1932.": ("SUPPORTED", 0.95),
    "The bridge is made of steel.": ("SUPPORTED", 0.97),
    "The bridge carries a railway.": ("SUPPORTED", 0.85),
    "The bridge was designed by a committee.": ("REFUTED", 0.2),
    "The bridge collapsed in 1950.": ("REFUTED", 0.95),
}


@pytest.mark.parametrize(("method", "threshold", "support", "balanced", "accuracy"), [
    # threshold 0.9: supported 0.95, 0.97 -> support, 0.85 -> not (recall 2/3); refuted 0.2 -> not,
    # 0.95 -> support (recall 1/2). Balanced accuracy (2/3 + 1/2) / 2 = 7/12, accuracy 3/5.
    ("vanilla", None, [1, 1, 2, 2, 1], 7 / 12, 3 / 5),
    ("cot", None, [1, 1, 2, 2, 1], 7 / 12, 3 / 5),
    # threshold 0.8: 0.85 is now support too (recall 1), refuted unchanged: (1 + 1/2) / 2, accuracy 4/5.
    ("vanilla", "0.8", [1, 1, 1, 2, 1], 3 / 4, 4 / 5),
])
def test_support_decision_and_balanced_accuracy_values(tmp_path: Path, method: str, threshold: str | None,
                                                       support: list[int], balanced: float, accuracy: float) -> None:
    data = write_claims(tmp_path / "bridge.jsonl", [
        {"claim": c, "label": label, "evidence": ["A short note about the bridge."]}
        for c, (label, _) in CLAIMS.items()])
    with FakeOpenAIServer(responder=scripted({c: p for c, (_, p) in CLAIMS.items()})) as server:
        out = tmp_path / "run"
        extra = ["--threshold", threshold] if threshold else []
        result = invoke(eval_args(server, tmp_path, out, "--data", str(data), "--method", method, *extra))
        assert result.exit_code == 0, result.output
    by_id = {p.id: p for p in predictions(out)}
    assert len(by_id) == 5
    claims = list(CLAIMS)
    for k, claim in enumerate(claims):
        p = by_id[f"bridge:{k}"]
        assert p.p_outcome1 == CLAIMS[claim][1] and p.label == (1 if CLAIMS[claim][0] == "SUPPORTED" else 2)
        assert p.prediction == support[k] and not p.unknown and p.status == "ok"
    m = metrics(out)
    assert m.runs[0]["balanced_accuracy"] == pytest.approx(balanced)
    assert m.mean["balanced_accuracy"] == pytest.approx(balanced)
    assert m.runs[0]["accuracy"] == pytest.approx(accuracy)
    assert m.runs[0]["coverage"] == 1.0


def test_the_runners_decision_at_exactly_the_threshold_is_not_support(tmp_path: Path) -> None:
    """P(claim) = 0.9 is not above 0.9: the prediction recorded for the instance, not only the metric,
    says 'not support'."""
    at = {"The dam was finished in 1936.": ("SUPPORTED", 0.9), "The dam is made of wood.": ("REFUTED", 0.9),
          "The dam holds back a lake.": ("SUPPORTED", 0.91)}
    data = write_claims(tmp_path / "dam.jsonl", [{"claim": c, "label": label, "evidence": ["A note about the dam."]}
                                                 for c, (label, _) in at.items()])
    with FakeOpenAIServer(responder=scripted({c: p for c, (_, p) in at.items()})) as server:
        out = tmp_path / "run"
        result = invoke(eval_args(server, tmp_path, out, "--data", str(data), "--method", "vanilla"))
        assert result.exit_code == 0, result.output
    by_id = {p.id: p for p in predictions(out)}
    assert [(by_id[f"dam:{k}"].p_outcome1, by_id[f"dam:{k}"].prediction) for k in range(3)] == [
        (0.9, 2), (0.9, 2), (0.91, 1)]
    assert not any(p.unknown for p in by_id.values())
    m = metrics(out)  # supported: 1 of 2 called support; refuted: 1 of 1 not: (1/2 + 1) / 2
    assert m.runs[0]["balanced_accuracy"] == pytest.approx(0.75) and m.runs[0]["accuracy"] == pytest.approx(2 / 3)


LOGPROBS = {  # claim -> (label, scripted log-probabilities of the first answer token, expected P(claim))
    # Both answers listed: P = e^-0.05 / (e^-0.05 + e^-3.05) = 1 / (1 + e^-3).
    "The tower is 300 m tall.": ("SUPPORTED", {"1": -0.05, "2": -3.05, "The": -4.0}, 1 / (1 + math.exp(-3.0))),
    # '2' not among the alternatives: it gets the lowest listed one (-2.0), an upper bound.
    "The tower was built in 1889.": ("SUPPORTED", {"1": -0.7, "I": -1.2, "x": -2.0}, 1 / (1 + math.exp(-1.3))),
    # Neither '1' nor '2': no probability (unknown), which the decision counts as 'not support'.
    "The tower is made of glass.": ("REFUTED", {"Yes": -0.2, "No": -1.8}, None),
    "The tower is in Rome.": ("REFUTED", {"2": -0.1, " 1": -2.5, "1": -2.6}, 1 / (1 + math.exp(2.4))),
}


def test_logits_probability_and_decision_from_the_servers_log_probabilities(tmp_path: Path) -> None:
    data = write_claims(tmp_path / "tower.jsonl", [{"claim": c, "label": label, "evidence": ["A note."]}
                                                   for c, (label, _, _) in LOGPROBS.items()])

    def first_token(body: dict) -> dict[str, float]:
        return LOGPROBS[CLAIM.search(body["messages"][-1]["content"]).group(1)][1]  # type: ignore[union-attr]

    with FakeOpenAIServer(responder=lambda body: "1", first_token_logprobs=first_token) as server:
        out = tmp_path / "run"
        result = invoke(eval_args(server, tmp_path, out, "--data", str(data), "--method", "logits"))
        assert result.exit_code == 0, result.output
        assert all(b["top_logprobs"] == 20 and b["max_tokens"] == 1 for b in server.requests)
    by_id = {p.id: p for p in predictions(out)}
    for k, (_, (_, _, p)) in enumerate(LOGPROBS.items()):
        pred = by_id[f"tower:{k}"]
        assert pred.p_outcome1 == (None if p is None else pytest.approx(p)), k
    # ' 1' (with a space) counts as '1': the better of the two, -2.5, is used for the last claim.
    assert [by_id[f"tower:{k}"].prediction for k in range(4)] == [1, 2, None, 2]
    assert by_id["tower:2"].status == "abstained" and "neither '1' nor '2'" in (by_id["tower:2"].error or "")
    m = metrics(out)  # supported: 1 of 2 called support; refuted: 2 of 2 not: (1/2 + 1) / 2
    assert (m.runs[0]["balanced_accuracy"], m.runs[0]["coverage"]) == (pytest.approx(0.75), pytest.approx(0.75))


# --------------------------------------------------------------------------- long documents


def test_a_long_document_is_cut_to_a_small_context_and_recorded(tmp_path: Path) -> None:
    words = "The council met on Tuesday and discussed the harbour budget at length. "
    long_doc = (words * (20_000 // len(words) + 1))[:20_000]
    data = write_claims(tmp_path / "long.jsonl", [
        {"claim": "The council discussed the harbour.", "label": "SUPPORTED", "evidence": [long_doc]},
        {"claim": "The council met on Friday.", "label": "REFUTED", "evidence": ["It met on Tuesday."]},
    ])
    p_claim = {"The council discussed the harbour.": 0.95, "The council met on Friday.": 0.1}
    with FakeOpenAIServer(responder=scripted(p_claim)) as server:
        out = tmp_path / "run"
        result = invoke(eval_args(server, tmp_path, out, "--data", str(data), "--method", "vanilla",
                                  "--context-tokens", "512"))
        assert result.exit_code == 0, result.output
        sent = [b["messages"][-1]["content"] for b in server.requests]
    config = RunConfig.model_validate_json((out / "config.json").read_text())
    assert config.llm["context_tokens"] == 512
    cut = next(s for s in sent if "harbour." in s.splitlines()[-2])
    assert "characters omitted ...]" in cut and len(cut) < 512 * 3
    by_id = {p.id: p for p in predictions(out)}
    long_pred, short_pred = by_id["long:0"], by_id["long:1"]
    assert long_pred.truncated and long_pred.status == "ok" and long_pred.prediction == 1
    t = long_pred.sides[0].truncated
    assert t is not None and t.original_chars == len(long_doc.strip()) and 0 < t.kept_chars < 1500
    assert (t.context_tokens, t.counted, t.stages) == (512, "estimate", ["baseline.vanilla"])
    assert "condition truncated to fit the 512-token context" in (long_pred.sides[0].reason or "")
    assert not short_pred.truncated and short_pred.sides[0].truncated is None
    m = metrics(out)
    assert m.n_truncated == 1 and m.runs[0]["balanced_accuracy"] == 1.0
    assert any(n.startswith("1 prediction(s) had a condition cut to fit the 512-token context") for n in m.notes)


def test_context_tokens_is_an_option_of_every_llm_command_and_part_of_the_run(tmp_path: Path) -> None:
    for command in (["llm", "ping"], ["build"], ["infer"], ["demo"], ["eval", "--dataset", "cnn"]):
        result = invoke([*command, "--context-tokens", "100"])
        assert result.exit_code == 2, (command, result.output)
        assert "--context-tokens" in result.output and "at least 256" in result.output
    with FakeOpenAIServer(deterministic=True) as server:
        out = tmp_path / "run"
        assert invoke(eval_args(server, tmp_path, out, "--dataset", "covid", "--method", "vanilla", "--limit", "2",
                                "--context-tokens", "4096")).exit_code == 0
        other = invoke(eval_args(server, tmp_path, out, "--dataset", "covid", "--method", "vanilla", "--limit", "2",
                                 "--context-tokens", "2048"))
    assert other.exit_code == 2 and "llm.context_tokens was 4096, now 2048" in other.output


def test_anchor_hands_the_mapping_truncation_to_the_runner() -> None:
    """ANCHOR's estimate carries what its mapping cut, as the baselines' do (abstained answers too)."""
    import asyncio

    from anchor.methods import AnchorMethod
    from anchor.types import InferenceResult, MappingTrace, Scenario, TextTruncation

    cut = TextTruncation(original_chars=20_000, kept_chars=1_031, context_tokens=1024, counted="estimate",
                         stages=["mapping.select", "mapping.reflect"])

    class Engine:
        def __init__(self, unknown: bool, truncation: TextTruncation | None) -> None:
            self.unknown, self.truncation = unknown, truncation

        async def ainfer_one(self, space: object, condition: str) -> InferenceResult:
            return InferenceResult(
                condition=condition, p_outcome1=None if self.unknown else 0.93,
                p_outcome2=None if self.unknown else 0.07, unknown=self.unknown,
                unknown_reason="nothing mapped" if self.unknown else None,
                mapping=MappingTrace(condition=condition, retrieval="hierarchical", condition_truncated=self.truncation))

    async def prepare(scenario: Scenario) -> None:
        return None

    method = AnchorMethod.__new__(AnchorMethod)
    method.seed, method.key = 0, scenario_key  # shared spaces: the key is the scenario's
    method.prepare = prepare  # type: ignore[method-assign]
    scenario = Scenario(text="", outcome1="A claim.", outcome2="It is not true that a claim.")
    for unknown, truncation in ((False, cut), (True, cut), (False, None)):
        method.engine = Engine(unknown, truncation)  # type: ignore[assignment]
        estimate = asyncio.run(method.estimate(scenario, "A document.", None))
        assert estimate.truncated == truncation
        assert estimate.status == ("abstained" if unknown else "ok")
