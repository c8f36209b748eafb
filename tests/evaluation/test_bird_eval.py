"""BIRD in the evaluation harness, end to end against a real local OpenAI-compatible server with
scripted answers: BIRD (strict) abstains when nothing maps, BIRD (relaxed) maps, the CoT fallback on
decision data, stored BIRD models reused across runs and on resume, ``--stage`` checks, ``anchor
cost`` against the server's own counts, and the Table 4 layout of ``anchor report``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.bird import BirdMethod, load_model
from anchor.cli import app
from anchor.evaluation.datasets import load_dataset, load_pairwise, scenario_key
from anchor.llm.scripted import ScriptedRequest
from anchor.methods.bird_on_anchor import load_transplant
from anchor.rundir.records import RunConfig
from tests.bird.script import BirdScript
from tests.fakeserver import FakeOpenAIServer
from tests.run_helpers import eval_args, metrics_of, predictions_of

runner = CliRunner()
PAIR = load_pairwise()[0]
PLASMA = load_dataset("plasma")[:2]
TINY = ["--n-target", "5", "--batch-size", "3", "--max-rounds", "2", "--vote-samples", "1", "--vote-ratio", "0.3"]
COT_P = 0.8

STRUCTURE = [("water flow", ["running water", "still water"]), ("time spent", ["a quick wash", "a long soak"])]


#: The tests pass every setting as a flag: variables of the user's shell must not leak in.
pytestmark = pytest.mark.usefixtures("clean_anchor_env")


def bird_script(maps: dict[str, str]) -> BirdScript:
    """Values labelled 1 / 2 in order; ``maps``: condition -> the value every mapping round names."""

    def choose(condition, factor, values, r):
        value = maps.get(condition)
        return value if value in values else "none"

    def judge(values):
        return ("unlikely", "likely") if "running water." in values else ("likely", "unlikely")

    return BirdScript(structure=STRUCTURE, label=lambda f, v, r: "statement 1" if v in ("still water", "a long soak")
                      else "statement 2", judge=judge, choose=choose,
                      closest=lambda condition, options: ("water flow", "running water"))


def responder(script: BirdScript):
    """The BIRD script over HTTP; the CoT fallback answers ``COT_P``."""

    def respond(body) -> str:
        fmt = body["response_format"]
        name = fmt["json_schema"]["name"]
        if name.startswith("ReasonedProbability"):
            return json.dumps({"reasoning": "Scripted.", "probability": COT_P})
        req = ScriptedRequest(messages=body["messages"], schema_name=name, json_schema=fmt["json_schema"]["schema"],
                              temperature=body.get("temperature", 0), max_tokens=body.get("max_tokens", 0),
                              seed=body.get("seed"), top_logprobs=None)
        return json.dumps(script(req))

    return respond


def invoke(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (result.stderr, result.exception)
    return result


def test_strict_abstains_relaxed_maps_and_models_are_reused(tmp_path):
    maps = {PAIR.condition1: "running water"}  # condition 2 maps to nothing
    script = bird_script(maps)
    with FakeOpenAIServer(responder=responder(script)) as server:
        strict = tmp_path / "strict"
        invoke(eval_args(server, tmp_path / "cache", strict, "--dataset", "common2sense-pairwise", "--method", "bird",
                         "--limit", "1"))
        built = server.completions
        metrics = metrics_of(strict)
        (pred,) = predictions_of(strict)
        key = f"{scenario_key(PAIR.scenario)}-s0"
        model = load_model(strict / "bird" / f"{key}.json")
        assert [f.name for f in model.factors] == ["water flow", "time spent"]
        # The dataset's BIRD settings are recorded and used: Common2Sense completes values with opposites.
        config = RunConfig.model_validate_json((strict / "config.json").read_text())
        assert config.method_config["value_completion"] == "opposites" == model.config.value_completion
        # Side 1 maps to 'running water' (labelled outcome 2), side 2 abstains: BIRD's unknown.
        assert [s.status for s in pred.sides] == ["ok", "abstained"]
        assert pred.sides[1].p_outcome1 is None and "votes" in pred.sides[1].reason
        p1 = pred.sides[0].p_outcome1
        assert p1 < 0.5 and pred.p_gold_1 == pytest.approx(p1 if PAIR.gold == 1 else 1 - p1)
        assert metrics.mean["coverage"] == 0.0 and metrics.n_abstained == 1 and metrics.fallback is None
        assert metrics.cost["total"].llm_calls == built  # every request once
        assert metrics.cost["bird.cpt_data"].llm_calls == 128  # the 2 x 2 product, cycled up to 128 judgements

        # BIRD relaxed, reusing the stored model: no second build, only the mapping calls.
        relaxed = tmp_path / "relaxed"
        invoke(eval_args(server, tmp_path / "cache2", relaxed, "--dataset", "common2sense-pairwise", "--method",
                         "bird-relaxed", "--limit", "1", "--spaces-from", str(strict)))
        r_metrics = metrics_of(relaxed)
        new = server.completions - built
        assert not (relaxed / "bird").exists()
        assert set(r_metrics.cost) == {"bird.mapping", "bird.reflect", "bird.mapping.relaxed", "total"}
        assert r_metrics.cost["total"].llm_calls == new and r_metrics.cost["bird.mapping.relaxed"].llm_calls == 1
        assert r_metrics.cost_reused["bird.cpt_data"].llm_calls == metrics.cost["bird.cpt_data"].llm_calls
        (rpred,) = predictions_of(relaxed)
        assert [s.status for s in rpred.sides] == ["ok", "ok"] and r_metrics.mean["coverage"] == 1.0
        # Both conditions now map to 'running water': the same probability, as the stored model computes it.
        assert rpred.sides[1].p_outcome1 == pytest.approx(rpred.sides[0].p_outcome1) == pytest.approx(p1)

        # Resume after losing the predictions: the model is loaded from the run directory, not rebuilt.
        (strict / "predictions.jsonl").unlink()
        before = server.completions
        invoke(eval_args(server, tmp_path / "cache3", strict, "--dataset", "common2sense-pairwise", "--method",
                         "bird", "--limit", "1"))
        again = server.completions - before
        assert again == metrics.cost["bird.mapping"].llm_calls + metrics.cost["bird.reflect"].llm_calls
        assert load_model(strict / "bird" / f"{key}.json") == model
        assert predictions_of(strict)[0].sides[0].p_outcome1 == pytest.approx(p1)


def test_decision_unknown_falls_back_to_cot(tmp_path):
    maps = {PLASMA[0].condition: "running water"}  # the second condition maps to nothing
    with FakeOpenAIServer(responder=responder(bird_script(maps))) as server:
        out = tmp_path / "plasma"
        result = invoke(eval_args(server, tmp_path / "cache", out, "--dataset", "plasma", "--method", "bird",
                                  "--limit", "2"))
        metrics = metrics_of(out)
        preds = {p.id: p for p in predictions_of(out)}
        served = server.completions
    first, second = preds[PLASMA[0].id], preds[PLASMA[1].id]
    assert first.sides[0].fallback is None and first.p_outcome1 < 0.5
    assert second.sides[0].fallback == "cot" and second.p_outcome1 == COT_P and second.status == "ok"
    assert "answered by the fallback cot" in second.sides[0].reason
    assert metrics.n_fallback == 1 and metrics.fallback == "cot" and metrics.n_abstained == 0
    assert metrics.cost["baseline.cot"].llm_calls == 1 and metrics.cost["total"].llm_calls == served
    assert json.loads(result.stdout)["n_fallback"] == 1
    report = invoke(["report", str(out)])
    assert "1 of 2 prediction(s) answered by cot" in report.stdout
    # BIRD keeps one model per scenario and run, as ANCHOR keeps its spaces: the Runs table says so.
    (runs_row,) = [line for line in report.stdout.splitlines() if line.startswith("| plasma |")]
    assert "| per-run |" in runs_row
    # BIRD's stages fall in the same phases as in `anchor cost`, not in "other".
    assert re.search(r"\| factor space \| bird\.sentences \|", report.stdout)
    assert re.search(r"\| mapping \| bird\.mapping \|", report.stdout)


def test_stage_is_checked_before_anything_runs(tmp_path):
    out = tmp_path / "x"
    result = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "bird", "--stage",
                                 "factors", "--out", str(out)])
    assert result.exit_code == 2 and "--stage applies only to --method bird-on-anchor" in result.stderr
    result = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "bird-on-anchor",
                                 "--out", str(out)])
    assert result.exit_code == 2 and "needs --stage, one of: factors, mapping, pool" in result.stderr
    result = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "bird-on-anchor",
                                 "--stage", "everything", "--out", str(out)])
    assert result.exit_code == 2 and "--stage" in result.stderr
    assert not out.exists()


def stats(server: FakeOpenAIServer) -> dict:
    import urllib.request

    with urllib.request.urlopen(f"{server.base_url.removesuffix('/v1')}/_stats") as fh:
        return json.load(fh)


def test_cost_totals_equal_each_servers_counts(tmp_path):
    common = ["--dataset", "common2sense-pairwise", "--limit", "2"]
    with FakeOpenAIServer(deterministic=True, fault_rates={"500": 0.05}) as s_anchor, \
            FakeOpenAIServer(deterministic=True, fault_rates={"500": 0.05}) as s_bird:
        invoke(eval_args(s_anchor, tmp_path / "c1", tmp_path / "anchor", *common, "--method", "anchor", *TINY))
        invoke(eval_args(s_bird, tmp_path / "c2", tmp_path / "bird", *common, "--method", "bird"))
        # The same BIRD slice again in another directory, answered from the cache: listed apart.
        invoke(eval_args(s_bird, tmp_path / "c2", tmp_path / "bird-cached", *common, "--method", "bird"))
        a, b = stats(s_anchor), stats(s_bird)
    result = invoke(["cost", str(tmp_path / "anchor"), str(tmp_path / "bird"), "--json",
                     "--out", str(tmp_path / "cost.png")])
    doc = json.loads(result.stdout)
    # Attempts are what each server received; requests leave out the attempts its 500s made retry.
    assert doc["a"]["attempts"] == a["requests"] and doc["b"]["attempts"] == b["requests"]
    assert doc["a"]["requests"] == a["requests"] - a["served"].get("500", 0)
    assert doc["b"]["requests"] == b["requests"] - b["served"].get("500", 0)
    assert doc["a"]["prompt_tokens"] == a["prompt_tokens"] and doc["a"]["completion_tokens"] == a["completion_tokens"]
    assert doc["b"]["prompt_tokens"] == b["prompt_tokens"] and doc["b"]["completion_tokens"] == b["completion_tokens"]
    assert a["served"].get("500", 0) + b["served"].get("500", 0) > 0  # failed attempts are requests too
    assert doc["slice"]["scenarios"] == 2
    total = doc["per_scenario"]["total"]
    assert total["a"]["attempts"] == a["requests"] / 2 and total["b"]["attempts"] == b["requests"] / 2
    assert total["ratio"]["requests"] == round(doc["b"]["requests"] / doc["a"]["requests"], 4)
    assert sum(s["b"]["attempts"] for s in doc["scenarios"].values()) == b["requests"]
    assert doc["a"]["concurrency"] == 16 and (tmp_path / "cost.png").read_bytes()[:4] == b"\x89PNG"
    cached = json.loads(invoke(["cost", str(tmp_path / "bird"), str(tmp_path / "bird-cached"), "--json"]).stdout)
    assert cached["b"]["attempts"] == 0 and cached["b"]["cache_hits"] == b["requests"] - b["served"].get("500", 0)
    text = invoke(["cost", str(tmp_path / "anchor"), str(tmp_path / "bird")]).stdout
    assert "| **total** |" in text and "construction" in text and "up to 16 requests at once" in text


def test_cost_refuses_runs_of_different_slices(tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        invoke(eval_args(server, tmp_path / "c", tmp_path / "one", "--dataset", "plasma", "--limit", "1",
                         "--method", "cot"))
        invoke(eval_args(server, tmp_path / "c", tmp_path / "two", "--dataset", "plasma", "--limit", "2",
                         "--method", "cot"))
    result = runner.invoke(app, ["cost", str(tmp_path / "one"), str(tmp_path / "two")])
    assert result.exit_code == 2
    assert "not runs of the same dataset slice: limit is 1 in the first and 2 in the second" in result.stderr
    result = runner.invoke(app, ["cost", str(tmp_path / "one"), str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and "no such run directory" in result.stderr


def test_transplant_variants_and_table_4(tmp_path):
    common = ["--dataset", "common2sense-pairwise", "--limit", "1"]
    dirs = {}
    with FakeOpenAIServer(deterministic=True) as server:
        dirs["relaxed"] = tmp_path / "relaxed"
        invoke(eval_args(server, tmp_path / "c0", dirs["relaxed"], *common, "--method", "bird-relaxed"))
        dirs["anchor"] = tmp_path / "anchor"
        invoke(eval_args(server, tmp_path / "c0", dirs["anchor"], *common, "--method", "anchor", *TINY))
        for i, stage in enumerate(("factors", "mapping", "pool"), 1):
            dirs[stage] = tmp_path / stage
            before = server.completions
            invoke(eval_args(server, tmp_path / f"c{i}", dirs[stage], *common, "--method", "bird-on-anchor",
                             "--stage", stage, "--spaces-from", str(dirs["anchor"]), *TINY))
            m = metrics_of(dirs[stage])
            assert m.stage == stage and m.cost["total"].llm_calls == server.completions - before
            assert "abduction.generate" not in m.cost  # the factor space came from the ANCHOR run
            assert m.cost["bird.cpt_data"].llm_calls == 128
            (artefact,) = (dirs[stage] / "bird-on-anchor").glob("*.json")
            assert (stage == "factors") == ("-bird-map-" in artefact.name)
        assert "inference.phi" in metrics_of(dirs["pool"]).cost and "inference.phi" not in metrics_of(
            dirs["mapping"]).cost
    report = invoke(["report", *(str(dirs[k]) for k in ("pool", "relaxed", "mapping", "factors")),
                     "--out", str(tmp_path / "rep")])
    md = report.stdout
    section = md[md.index("## BIRD on ANCHOR's factor space"):md.index("## Cost")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split(" | ")[0] for r in rows] == ["| BIRD‡ baseline (bird-relaxed)", "| + ANCHOR-generated factors",
                                                 "| + ANCHOR mapping", "| + NB and CBN pooled (LOP)"]
    assert rows[0].split(" | ")[3:5] == ["1.00", "1.00"]
    assert "| Setting | Avg. F1 | Cov. | Tok./B | Time/B |" in section

    def mapping_tokens(d: Path) -> int:
        m = metrics_of(d)
        return sum(c.prompt_tokens + c.completion_tokens for s, c in m.cost.items()
                   if s in ("bird.mapping", "bird.reflect", "bird.mapping.relaxed", "mapping.select",
                            "mapping.reflect"))

    expected = mapping_tokens(dirs["factors"]) / mapping_tokens(dirs["relaxed"])
    assert rows[1].split(" | ")[3] == f"{expected:.2f}"


def test_table_4_mapping_cost_answered_from_the_cache_is_the_recorded_cost(tmp_path):
    """The README's recipe on one cache: the transplant's ANCHOR mapping repeats the ANCHOR run's mapping
    requests, so all of them are cache hits. The row's tokens are then what those requests cost when the
    ANCHOR run made them (it used to print Tok./B 0.00), and the row says so."""
    from anchor.evaluation.cost.phases import phase_of
    from anchor.llm.ledger import CallRecord

    common = ["--dataset", "common2sense-pairwise", "--limit", "1"]
    cache = tmp_path / "cache"
    with FakeOpenAIServer(deterministic=True) as server:
        invoke(eval_args(server, cache, tmp_path / "a", *common, "--method", "anchor", *TINY))
        invoke(eval_args(server, cache, tmp_path / "b", *common, "--method", "bird-relaxed"))
        before = stats(server)
        invoke(eval_args(server, cache, tmp_path / "t-mapping", *common, "--method", "bird-on-anchor", "--stage",
                         "mapping", "--spaces-from", str(tmp_path / "a"), *TINY))
        after = stats(server)
    transplant = metrics_of(tmp_path / "t-mapping")
    assert "mapping.select" not in transplant.cost or transplant.cost["mapping.select"].llm_calls == 0
    made = {stage: c.llm_calls for stage, c in transplant.cost.items() if stage != "total"}
    assert after["requests"] - before["requests"] == transplant.cost["total"].llm_calls == sum(made.values())

    def mapping_tokens(run: Path, outcomes: tuple[str, ...]) -> int:
        records = [CallRecord.model_validate_json(line) for line in (run / "calls.jsonl").read_text().splitlines()]
        return sum(r.prompt_tokens + r.completion_tokens for r in records
                   if r.outcome in outcomes and phase_of(r.stage) == "mapping")

    # Both runs map the same two conditions with the same seed: the transplant's answers are those of
    # the ANCHOR run's answered mapping requests; the baseline made all of its own.
    recorded = mapping_tokens(tmp_path / "a", ("ok",))
    baseline = mapping_tokens(tmp_path / "b", ("ok", "invalid_output", "truncated", "transient_error"))
    assert recorded > 0 and baseline > 0
    md = invoke(["report", str(tmp_path / "b"), str(tmp_path / "t-mapping"), "--out", str(tmp_path / "rep")]).stdout
    (row,) = [line for line in md.splitlines() if line.startswith("| + ANCHOR mapping")]
    cells = row.split(" | ")
    assert cells[3] == f"{recorded / baseline:.2f}" and cells[5] == f"{recorded:,.0f}"  # one prediction
    assert float(cells[4]) > 0  # the time span of those requests when they were made
    assert cells[7].startswith("0 request(s) made (0 attempt(s)); recorded cost of ")
    assert "their tokens and time are those the cache recorded" in md


def test_shared_transplant_does_not_depend_on_the_run_that_builds_it_and_reports_the_reused_space(tmp_path):
    """--spaces shared: the BIRD-on-ANCHOR artefact is built with the base seed whichever run builds it;
    --spaces-from: the reused ANCHOR space's build cost is reported under cost_reused."""
    common = ["--dataset", "common2sense-pairwise", "--limit", "1", "--spaces", "shared", *TINY]
    with FakeOpenAIServer(deterministic=True) as server:
        anchor_dir = tmp_path / "anchor"
        invoke(eval_args(server, tmp_path / "c0", anchor_dir, *common, "--method", "anchor"))
        out = tmp_path / "transplant"
        args = eval_args(server, tmp_path / "c1", out, *common, "--method", "bird-on-anchor", "--stage", "factors",
                         "--runs", "2", "--spaces-from", str(anchor_dir))
        invoke(args)
        (path,) = (out / "bird-on-anchor").glob("*.json")
        first = load_transplant(path)
        # Now run 1 builds it: drop the artefact and run 1's prediction, and resume.
        path.unlink()
        preds = (out / "predictions.jsonl").read_text().splitlines()
        (out / "predictions.jsonl").write_text("".join(f"{line}\n" for line in preds if '"run":0' in line))
        invoke(args)
        again = load_transplant(path)
    assert [c.factor_ids for c in again.conditions] == [c.factor_ids for c in first.conditions]
    assert again.model.samples == first.model.samples and again.model.parameters == first.model.parameters
    m, built = metrics_of(out), metrics_of(anchor_dir)
    assert "abduction.generate" not in m.cost and "abduction.generate" in m.cost_reused
    for stage, cost in m.cost_reused.items():
        if stage != "total":
            assert cost.llm_calls == built.cost[stage].llm_calls, stage
    assert "1 artefact(s) reused" in m.cost_scope


def test_estimates_match_the_stored_model(tmp_path):
    """The runner's probability is what the stored BIRD model gives for that mapping (gold orientation)."""
    import asyncio

    from anchor.llm.client import LLMClient
    from anchor.llm.ledger import CostLedger
    from anchor.llm.openai_backend import OpenAICompatibleBackend

    maps = {PAIR.condition1: "still water", PAIR.condition2: "running water"}
    script = bird_script(maps)
    with FakeOpenAIServer(responder=responder(script)) as server:
        out = tmp_path / "run"
        invoke(eval_args(server, tmp_path / "cache", out, "--dataset", "common2sense-pairwise", "--method", "bird",
                         "--limit", "1"))
        model = load_model(next((out / "bird").glob("*.json")))

        async def again():
            client = LLMClient(OpenAICompatibleBackend(server.base_url, None, timeout=120.0), ledger=CostLedger())
            try:
                method = BirdMethod(client, model.config, relaxed=False)
                return [await method.estimate(model, c) for c in (PAIR.condition1, PAIR.condition2)]
            finally:
                await client.aclose()

        e1, e2 = asyncio.run(again())
    (pred,) = predictions_of(out)
    assert e1.p_outcome1 > 0.5 > e2.p_outcome1
    assert [s.p_outcome1 for s in pred.sides] == [pytest.approx(e1.p_outcome1), pytest.approx(e2.p_outcome1)]
    gold = [e1.p_outcome1, e2.p_outcome1] if PAIR.gold == 1 else [1 - e1.p_outcome1, 1 - e2.p_outcome1]
    assert [pred.p_gold_1, pred.p_gold_2] == [pytest.approx(g) for g in gold]
    assert pred.prediction == (1 if gold[0] > gold[1] else 2)
