"""Estimator analysis: distribution statistics on samples whose answers are known, the KDE, reusing a
mapping with a second (scripted) estimator model, and the outputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from anchor.analysis.estimator import (
    EstimatorAnalysis,
    collect_phis,
    estimator_analysis,
    estimator_comparison,
    histogram,
    js_divergence,
    phi_density,
    phi_distribution_stats,
    reestimate,
    write_estimator,
)
from anchor.inference.bayes import cbn_posterior, naive_bayes_posterior
from anchor.pipeline import Anchor
from anchor.types import FactorEvidence, FactorLabel, InferenceResult
from tests.analysis.support import decision, metrics
from tests.helpers import ScriptedLLM, kind
from tests.run_helpers import server_responder

# --------------------------------------------------------------------------- statistics


def test_identical_samples():
    a = [0.1, 0.35, 0.35, 0.6, 0.92]
    s = phi_distribution_stats(a, list(a))
    assert s.js_divergence == 0.0
    assert s.wasserstein == 0.0
    assert s.ks_statistic == 0.0
    assert s.ks_pvalue == 1.0
    assert not s.significant
    assert (s.n_main, s.n_estimator, s.js_bins) == (5, 5, 20)
    assert s.mean_main == s.mean_estimator == pytest.approx(0.464)


def test_disjoint_samples():
    a = [0.0, 0.01, 0.02, 0.03, 0.04]
    b = [0.96, 0.97, 0.98, 0.99, 1.0]
    s = phi_distribution_stats(a, b)
    assert s.js_divergence == pytest.approx(1.0)  # disjoint histograms: the maximum, in bits
    assert s.wasserstein == pytest.approx(0.96)  # every value moves by 0.96
    assert s.ks_statistic == 1.0
    # Exact KS p-value for two completely separated samples of 5: 2 / C(10, 5).
    assert s.ks_pvalue == pytest.approx(2 / math.comb(10, 5))
    assert s.significant


def test_shift_moves_the_wasserstein_distance_by_the_shift():
    rng = np.random.default_rng(0)
    a = rng.uniform(0.1, 0.8, size=200)
    s = phi_distribution_stats(a, a + 0.1)
    assert s.wasserstein == pytest.approx(0.1)
    assert s.mean_estimator - s.mean_main == pytest.approx(0.1)


def test_js_divergence_by_hand():
    # Histograms P = (1, 0, ...) and Q = (1/2, 1/2, 0, ...); M = (3/4, 1/4).
    # JS = 1/2 KL(P||M) + 1/2 KL(Q||M) = 1/2 log2(4/3) + 1/4 log2(2/3) + 1/4 log2(2).
    expected = 0.5 * math.log2(4 / 3) + 0.25 * math.log2(2 / 3) + 0.25
    assert js_divergence([0.01, 0.02], [0.01, 0.06]) == pytest.approx(expected)
    # Binning matters: with two bins both samples fall in the first one.
    assert js_divergence([0.01, 0.02], [0.01, 0.06], bins=2) == 0.0


def test_histogram_closes_the_last_bin():
    assert histogram([0.0, 1.0, 1.0, 0.5], bins=4).tolist() == [0.25, 0.0, 0.25, 0.5]


@pytest.mark.parametrize(("values", "message"), [
    ([], "needs at least one phi value"),
    ([0.2, float("nan")], r"main phi values\[1\]"),
    ([0.2, 1.5], r"main phi values\[1\] = 1.5 is not a probability"),
    ([-0.1], r"main phi values\[0\]"),
])
def test_bad_samples_are_rejected(values, message):
    with pytest.raises(ValueError, match=message):
        phi_distribution_stats(values, [0.5])


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="alpha"):
        phi_distribution_stats([0.5], [0.5], alpha=1.0)
    with pytest.raises(ValueError, match="bins"):
        js_divergence([0.5], [0.5], bins=0)


# --------------------------------------------------------------------------- density


@pytest.mark.parametrize("sample", [
    [0.1, 0.3, 0.35, 0.5, 0.52, 0.7, 0.9],
    [0.5] * 6,                    # no spread: the bandwidth floor applies
    [0.0, 0.0, 0.01, 0.03, 0.99],  # mass at both edges is reflected back in
])
def test_density_integrates_to_one_on_the_unit_interval(sample):
    d = phi_density(sample, points=2001)
    assert d.grid[0] == 0.0 and d.grid[-1] == 1.0 and len(d.grid) == 2001
    assert np.trapezoid(d.density, d.grid) == pytest.approx(1.0, abs=2e-3)
    assert min(d.density) >= 0.0


def test_density_bandwidth_and_peak():
    sample = [0.55, 0.58, 0.6, 0.6, 0.62, 0.65, 0.1]
    d = phi_density(sample)
    assert d.bandwidth == pytest.approx(float(np.std(sample, ddof=1)) * 7 ** -0.2)
    assert d.grid[int(np.argmax(d.density))] == pytest.approx(0.6, abs=0.03)
    assert phi_density([0.5, 0.5]).bandwidth == 0.01
    with pytest.raises(ValueError, match="bandwidth"):
        phi_density(sample, bandwidth=0.0)


# --------------------------------------------------------------------------- collecting phi and re-estimating


def evidence(fid: str, phi: float, raw: float | None = None) -> FactorEvidence:
    return FactorEvidence(factor_id=fid, text=fid, theme=None, label=FactorLabel.NEUTRAL, phi=phi, phi_raw=raw)


def test_collect_phis():
    results = [
        InferenceResult(condition="a", p_outcome1=0.6, p_outcome2=0.4, unknown=False,
                        factors=[evidence("f1", 0.99, 1.0), evidence("f2", 0.3)]),
        InferenceResult(condition="b", p_outcome1=None, p_outcome2=None, unknown=True),
    ]
    assert collect_phis(results) == [0.99, 0.3]
    assert collect_phis(results, raw=True) == [1.0, 0.3]


async def test_reestimate_reuses_the_mapping_and_asks_the_estimator(scripted_client, embedder, make_space):
    space = make_space([("Heat", ["water temperature", "boiling point"]), ("Cost", ["gas price"])])
    main = scripted_client(ScriptedLLM(select=lambda c, shown: ["water temperature", "gas price"],
                                       phi=lambda t: 0.8, latent_params=lambda line: (0.7, 0.2)))
    first = await Anchor(client=main, embedder=embedder).ainfer_one(space, "The stove burns gas to boil water.")
    assert [f.phi for f in first.factors] == [0.8, 0.8]
    asked_before = len(main.backend.requests)

    estimator = scripted_client(ScriptedLLM(phi={"water temperature": 0.35, "gas price": 0.6}.get,
                                            latent_params=lambda line: (0.25, 0.5)))
    again = await reestimate(space, first, client=main, estimator=estimator)
    assert again.mapping == first.mapping
    assert [(f.text, f.phi) for f in again.factors] == [("water temperature", 0.35), ("gas price", 0.6)]
    assert again.nb == pytest.approx(naive_bayes_posterior([0.35, 0.6]))
    assert again.cbn == pytest.approx(cbn_posterior([0.35, 0.6], [0, 0], [(0.25, 0.5)]))
    # The main model only grouped the factors again (no selection, no reflection, no elicitation).
    assert [kind(r) for r in main.backend.requests[asked_before:]] == ["LatentPartition"]
    assert sorted(kind(r) for r in estimator.backend.requests) == ["FactorProbabilities", "LatentParams"]

    with pytest.raises(ValueError, match="no mapping trace"):
        await reestimate(space, first.model_copy(update={"mapping": None}), client=main, estimator=estimator)


# --------------------------------------------------------------------------- result and outputs


def test_estimator_comparison_and_outputs(tmp_path):
    # Decision task: the main model gets 3 of 4 right, the estimator 2 of 4 (one unknown).
    main_report = metrics(tmp_path / "m", [decision(0, 1, 0.8), decision(1, 2, 0.3), decision(2, 1, 0.6),
                                           decision(3, 2, 0.7)], dataset="today")
    est_report = metrics(tmp_path / "e", [decision(0, 1, 0.9), decision(1, 2, None), decision(2, 1, 0.7),
                                          decision(3, 2, 0.6)], dataset="today")
    main_phis = [0.2, 0.4, 0.4, 0.7, 0.9]
    est_phis = [0.25, 0.45, 0.5, 0.75, 0.95]
    comp = estimator_comparison("today", main_report, est_report, main_phis, est_phis, main_model="big",
                                estimator_model="small")
    assert comp.main.score == pytest.approx(0.75) and comp.estimator.score == pytest.approx(0.5)
    assert comp.difference == pytest.approx(-0.25)
    assert comp.estimator.unknown_rate == pytest.approx(0.25)
    assert comp.phi.wasserstein == pytest.approx(np.mean(np.abs(np.array(est_phis) - np.array(main_phis))))
    assert comp.density_main.n == 5

    result = estimator_analysis([comp, comp.model_copy(update={"dataset": "plasma"})])
    files = write_estimator(result, tmp_path / "out")
    assert EstimatorAnalysis.model_validate(json.loads(files.json_path.read_text())) == result
    md = files.markdown_path.read_text()
    assert "| today | accuracy | 0.750 (big) | 0.500 (small) | −0.250 | 0.0% | 25.0% |" in md
    assert f"| {comp.phi.js_divergence:.3f} | {comp.phi.wasserstein:.3f} |" in md
    assert "not significant" in md
    assert files.png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_comparison_needs_the_same_kind_of_task(tmp_path):
    main_report = metrics(tmp_path / "m", [decision(0, 1, 0.8)], dataset="today")
    from tests.analysis.support import pair

    other = metrics(tmp_path / "p", [pair(0, 1, 0.8, 0.3)])
    with pytest.raises(ValueError, match="different kinds"):
        estimator_comparison("x", main_report, other, [0.5], [0.5], main_model="a", estimator_model="b")


# --------------------------------------------------------------------------- two real servers


def test_two_servers_main_maps_estimator_elicits(tmp_path, embedder, make_space):
    from anchor.llm.settings import LLMSettings, make_client
    from tests.fakeserver import FakeOpenAIServer

    space = make_space([("Heat", ["water temperature", "boiling point"]), ("Cost", ["gas price"])])
    conditions = ["The stove burns gas to boil water.", "Gas for the stove and hot water cost money."]
    pick = lambda condition, shown: [t for t in shown if t in ("water temperature", "gas price")]  # noqa: E731
    main_script = ScriptedLLM(select=pick, phi=lambda t: 0.9, latent_params=lambda line: (0.9, 0.1))
    est_script = ScriptedLLM(phi={"water temperature": 0.35, "gas price": 0.6}.get,
                             latent_params=lambda line: (0.25, 0.5))
    with FakeOpenAIServer(model="main-model", responder=server_responder(main_script)) as main_server, \
            FakeOpenAIServer(model="small-model", responder=server_responder(est_script)) as est_server:
        main_settings = LLMSettings(base_url=main_server.base_url, use_cache=False)
        main_only = Anchor(client=make_client(main_settings), embedder=embedder).infer(space, conditions)
        client = make_client(main_settings)
        estimator = make_client(LLMSettings(base_url=est_server.base_url, use_cache=False), ledger=client.ledger)
        swapped = Anchor(client=client, embedder=embedder, estimator=estimator).infer(space, conditions)

        est_kinds = {_json_name(b) for b in est_server.requests}
        main_kinds = {_json_name(b) for b in main_server.requests}
    # The estimator states every probability: phi, the latent parameters and the scenario's base rate.
    assert est_kinds == {"FactorProbabilities2", "LatentParams1", "BaseRateAnswer"}
    assert "FactorProbabilities2" in main_kinds and "Selection" in main_kinds
    for a, b in zip(main_only, swapped, strict=True):
        assert a.mapping is not None and b.mapping is not None
        assert a.mapping.mapped == b.mapping.mapped  # the same mapping: only the estimates differ
        assert {c.stage for c in b.cost} >= {"mapping.select", "inference.phi", "inference.latent_params"}

    main_phis, est_phis = collect_phis(main_only), collect_phis(swapped)
    assert main_phis == [0.9] * 4 and sorted(est_phis) == [0.35, 0.35, 0.6, 0.6]
    stats = phi_distribution_stats(main_phis, est_phis)
    assert stats.js_divergence == pytest.approx(1.0)  # bins 18 against bins 7 and 12
    assert stats.wasserstein == pytest.approx((2 * 0.55 + 2 * 0.3) / 4)
    assert stats.ks_statistic == 1.0 and stats.ks_pvalue == pytest.approx(2 / math.comb(8, 4))


def _json_name(body: dict) -> str:
    return ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
