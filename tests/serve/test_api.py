"""The service's API against a real server: online predictions with the vanilla baseline (one request a case,
scripted by the test server), and every kind of bad request answered with a 4xx JSON error naming the field."""

from __future__ import annotations

import json
import math
import re

import pytest

from anchor.calibration.contract import CalibratorFile, FittedOn
from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import SCENARIO, running, vanilla, vanilla_p, wait_for

pytestmark = pytest.mark.usefixtures("clean_anchor_env")

CASE = {**SCENARIO, "condition": "Heavy rain is forecast for the whole morning."}
VANILLA = {**CASE, "method": "vanilla"}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve-api")
    calibrators = root / "calibrators"
    calibrators.mkdir()
    fitted = FittedOn(runs=["r"], datasets=["today"], method="vanilla", model="fake-model", n=10, n_outcome1=5,
                      date="2025-01-01T00:00:00+00:00")
    (calibrators / "platt-half.json").write_text(
        CalibratorFile(kind="platt", parameters={"slope": 0.5, "intercept": 0.0}, fitted_on=fitted).model_dump_json())
    (calibrators / "broken.json").write_text("{not json")
    with FakeOpenAIServer(responder=vanilla) as server, \
            running(root / "state", server, calibrators=calibrators, max_cases=5) as service:
        yield service, server


def test_one_case_is_answered_by_the_method_with_its_cost_and_links(live):
    service, server = live
    with service.client() as http:
        response = http.post("/v1/predictions", json=VANILLA)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["schema_version"] == 1 and body["state"] == "done" and body["status"] == "ok"
    assert body["p_outcome1"] == pytest.approx(vanilla_p(CASE["condition"]))
    assert body["p_outcome2"] == pytest.approx(1 - body["p_outcome1"])
    assert body["prediction"] == (1 if body["p_outcome1"] > 0.5 else 2)
    assert body["cost"]["requests"] == 1 and body["cost"]["prompt_tokens"] > 0
    assert body["case"]["condition"] == CASE["condition"] and body["method"] == "vanilla"
    assert body["links"]["self"] == f"/v1/predictions/{body['id']}"
    assert body["links"]["explanation"] is None  # vanilla leaves no audit trail
    with service.client() as http:
        again = http.get(body["links"]["self"])
        page = http.get(f"/v1/predictions/{body['id']}/explanation")
    assert again.status_code == 200 and again.json()["p_outcome1"] == body["p_outcome1"]
    assert page.status_code == 404 and page.json()["error"]["field"] == "id"


def test_a_list_of_cases_is_answered_in_order_and_a_calibrator_is_applied_by_name(live):
    service, _ = live
    conditions = ["The bus drivers strike.", "Her bike has a flat tyre.", "It is sunny and warm."]
    cases = [{**SCENARIO, "condition": c, "id": f"list-{i}"} for i, c in enumerate(conditions)]
    with service.client() as http:
        response = http.post("/v1/predictions", json={"cases": cases, "method": "vanilla", "calibrator": "platt-half"})
    assert response.status_code == 200, response.text
    answers = response.json()["predictions"]
    assert [a["id"] for a in answers] == ["list-0", "list-1", "list-2"]
    for answer, condition in zip(answers, conditions, strict=True):
        raw = vanilla_p(condition)
        assert answer["p_outcome1_raw"] == pytest.approx(raw)
        assert answer["p_outcome1"] == pytest.approx(1 / (1 + math.exp(-0.5 * math.log(raw / (1 - raw)))))
        assert answer["calibrator"] == "platt-half"


def test_an_id_sent_again_gives_the_same_answer_and_another_case_under_it_is_a_conflict(live):
    service, server = live
    case = {**VANILLA, "condition": "A colleague offers her a lift.", "id": "again-1"}
    with service.client() as http:
        first = http.post("/v1/predictions", json=case)
        before = server.completions
        second = http.post("/v1/predictions", json=case)
        after = server.completions
        other = http.post("/v1/predictions", json={**case, "condition": "Something else entirely."})
    assert first.status_code == second.status_code == 200
    assert second.json()["p_outcome1"] == first.json()["p_outcome1"] and after == before  # nothing asked again
    assert other.status_code == 409 and other.json()["error"]["field"] == "id"


def test_wait_zero_answers_202_with_where_to_poll_and_the_case_is_answered_all_the_same(live):
    service, server = live
    server.hold(after=server.completions)
    try:
        with service.client() as http:
            response = http.post("/v1/predictions", json={**VANILLA, "condition": "Roadworks close the cycle lane.",
                                                          "wait": 0})
            assert response.status_code == 202, response.text
            assert response.headers["location"] == response.json()["links"]["self"]
            assert response.json()["state"] == "pending" and int(response.headers["retry-after"]) >= 1
            polled = http.get(response.headers["location"])
            assert polled.status_code == 202
    finally:
        server.release()
    with service.client() as http:
        wait_for(lambda: http.get(response.headers["location"]).status_code == 200, what="the answer")
        done = http.get(response.headers["location"]).json()
    assert done["state"] == "done" and done["p_outcome1"] == pytest.approx(vanilla_p("Roadworks close the cycle lane."))


def test_a_full_queue_answers_429_with_retry_after(tmp_path):
    with FakeOpenAIServer(responder=vanilla) as server, running(tmp_path / "state", server, max_queue=2) as service:
        server.hold(after=0)
        try:
            with service.client() as http:
                waiting = http.post("/v1/predictions", json={"cases": [{**CASE, "condition": f"c{i}"} for i in range(2)],
                                                             "method": "vanilla", "wait": 0})
                assert waiting.status_code == 202
                refused = http.post("/v1/predictions", json={**VANILLA, "wait": 0})
        finally:
            server.release()
    assert refused.status_code == 429
    assert int(refused.headers["retry-after"]) >= 1 and refused.json()["error"]["code"] == "busy"


BIG = "x" * (10 * 1024 * 1024)


def _raw(body: bytes) -> dict:
    """Request arguments for a JSON body given as bytes (what a client's JSON encoder would not write)."""
    return {"content": body, "headers": {"content-type": "application/json"}}


def _json_with(fields: dict, extra: bytes) -> bytes:
    """``fields`` as a JSON object with ``extra`` (raw JSON members) added at its end."""
    return json.dumps(fields).encode()[:-1] + b", " + extra + b"}"


#: (what, HTTP method, path, request keyword arguments, status, field named)
BAD_REQUESTS = [
    ("missing field", "post", "/v1/predictions", {"json": {**SCENARIO}}, 422, "condition"),
    ("wrong type", "post", "/v1/predictions", {"json": {**CASE, "condition": 42}}, 422, "condition"),
    ("10 MB body", "post", "/v1/predictions", {"json": {**CASE, "condition": BIG}}, 413, "body"),
    ("body not JSON", "post", "/v1/predictions", {"content": b"{not json", "headers": {"content-type": "application/json"}},
     422, "body"),
    ("JSON that is not an object", "post", "/v1/predictions",
     {"content": b"[1, 2]", "headers": {"content-type": "application/json"}}, 422, "body"),
    ("empty JSON body", "post", "/v1/predictions", {"content": b"", "headers": {"content-type": "application/json"}},
     422, "body"),
    ("JSON sent as text/plain", "post", "/v1/predictions",
     {"content": json.dumps(CASE).encode(), "headers": {"content-type": "text/plain"}}, 415, "Content-Type"),
    ("JSON sent as a form", "post", "/v1/spaces",
     {"content": json.dumps(SCENARIO).encode(), "headers": {"content-type": "application/x-www-form-urlencoded"}}, 415,
     "Content-Type"),
    ("unknown field", "post", "/v1/predictions", {"json": {**CASE, "conditon": "typo"}}, 422, "conditon"),
    ("unknown method", "post", "/v1/predictions", {"json": {**CASE, "method": "oracle-of-delphi"}}, 422, "method"),
    ("method that needs a pair", "post", "/v1/predictions", {"json": {**CASE, "method": "compare"}}, 422, "method"),
    ("stage for a method without stages", "post", "/v1/predictions", {"json": {**VANILLA, "stage": "pool"}}, 422,
     "stage"),
    ("unknown calibrator", "post", "/v1/predictions", {"json": {**VANILLA, "calibrator": "nope"}}, 422, "calibrator"),
    ("damaged calibrator", "post", "/v1/predictions", {"json": {**VANILLA, "calibrator": "broken"}}, 422, "calibrator"),
    ("traversal in a calibrator", "post", "/v1/predictions", {"json": {**VANILLA, "calibrator": "../../etc/passwd"}},
     422, "calibrator"),
    ("traversal in an id", "post", "/v1/predictions", {"json": {**VANILLA, "id": "../../etc/passwd"}}, 422, "id"),
    ("empty outcome", "post", "/v1/predictions", {"json": {**CASE, "outcome1": "  "}}, 422, "outcome1"),
    ("same outcomes", "post", "/v1/predictions", {"json": {**CASE, "outcome2": "MIA CYCLES."}}, 422, "outcome2"),
    ("condition over its limit", "post", "/v1/predictions", {"json": {**CASE, "condition": "y" * 16_001}}, 422,
     "condition"),
    ("inline case and a list", "post", "/v1/predictions", {"json": {**CASE, "cases": [CASE]}}, 422, "scenario"),
    ("too many cases", "post", "/v1/predictions", {"json": {"cases": [CASE] * 6}}, 413, "cases"),
    ("duplicate ids in a list", "post", "/v1/predictions",
     {"json": {"cases": [{**CASE, "id": "d"}, {**CASE, "id": "d"}], "method": "vanilla"}}, 422, "cases[1].id"),
    ("negative wait", "post", "/v1/predictions", {"json": {**VANILLA, "wait": -1}}, 422, "wait"),
    ("wait over the limit", "post", "/v1/predictions", {"json": {**VANILLA, "wait": 10_000}}, 422, "wait"),
    ("unknown prediction", "get", "/v1/predictions/never-made", {}, 404, "id"),
    ("unknown job", "get", "/v1/jobs/j-0000", {}, 404, "id"),
    ("results of an unknown job", "get", "/v1/jobs/j-0000/results", {}, 404, "id"),
    ("cancel an unknown job", "delete", "/v1/jobs/j-0000", {}, 404, "id"),
    ("unknown space", "get", "/v1/spaces/abc-123", {}, 404, "id"),
    ("job without a format", "post", "/v1/jobs", {"content": b"id,x\n1,2\n"}, 415, "format"),
    ("job in an unknown format", "post", "/v1/jobs?format=xlsx", {"content": b"a"}, 422, "format"),
    ("job with an empty body", "post", "/v1/jobs?format=csv", {"content": b""}, 422, "body"),
    ("job column mapping to nothing", "post", "/v1/jobs?format=csv&column=condition=Evidence",
     {"content": b"scenario,outcome1,outcome2,condition\ns,a,b,c\n"}, 422, "column"),
    ("job with no usable row", "post", "/v1/jobs?format=csv", {"content": b"outcome1,outcome2,condition\na,a,c\n"},
     422, "body"),
    ("traversal in a job id", "post", "/v1/jobs?format=csv&id=..%2Fescape", {"content": b"outcome1,outcome2,condition\n"
                                                                              b"a,b,c\n"}, 422, "id"),
    ("space with one outcome", "post", "/v1/spaces", {"json": {"outcome1": "a"}}, 422, "outcome2"),
    ("lone surrogate in a space's scenario", "post", "/v1/spaces",
     _raw(b'{"scenario": "\\ud800", "outcome1": "a", "outcome2": "b"}'), 422, "scenario"),
    ("lone surrogate in a method", "post", "/v1/predictions", _raw(_json_with(CASE, b'"method": "\\udfff"')), 422,
     "method"),
    ("lone surrogate in a listed case", "post", "/v1/predictions",
     _raw(b'{"cases": [{"outcome1": "a", "outcome2": "b", "condition": "x\\ud800y"}]}'), 422, "cases[0].condition"),
    ("lone surrogate in a key", "post", "/v1/predictions", _raw(_json_with(CASE, b'"\\ud800": 1')), 422, "body"),
    ("repeated key", "post", "/v1/predictions", _raw(_json_with(VANILLA, b'"condition": "another"')), 422,
     "condition"),
    ("repeated key in a listed case", "post", "/v1/predictions",
     _raw(b'{"cases": [{"outcome1": "a", "outcome2": "b", "condition": "c"}, {"outcome1": "a", "outcome1": "b", '
          b'"outcome2": "c", "condition": "d"}], "method": "vanilla"}'), 422, "cases[1].outcome1"),
    ("repeated key in a space", "post", "/v1/spaces", _raw(b'{"outcome1": "a", "outcome2": "b", "outcome2": "c"}'),
     422, "outcome2"),
    ("JSON nested deeper than it can be read", "post", "/v1/predictions", _raw(b'{"a": ' * 50_000 + b"1" + b"}" * 50_000),
     400, "body"),
    ("unknown route", "get", "/v1/nothing-here", {}, 404, None),
    ("wrong HTTP method", "put", "/v1/predictions", {"json": CASE}, 405, None),
]


@pytest.mark.parametrize(("what", "verb", "path", "kwargs", "status", "field"), BAD_REQUESTS,
                         ids=[b[0] for b in BAD_REQUESTS])
def test_every_bad_request_is_a_4xx_json_error_naming_the_field(live, what, verb, path, kwargs, status, field):
    service, _ = live
    with service.client() as http:
        response = getattr(http, verb)(path, **kwargs) if verb != "put" else http.request("PUT", path, **kwargs)
    assert response.status_code == status, response.text[:500]
    body = response.json()
    assert body["schema_version"] == 1 and body["error"]["status"] == status
    assert body["error"]["field"] == field, body
    assert body["error"]["message"] and "Traceback" not in response.text
    assert len(response.text) < 10_000  # no echo of a big body


def test_a_repeated_key_and_a_lone_surrogate_are_refused_as_a_cases_file_refuses_them(live):
    service, _ = live
    with service.client() as http:
        twice = http.post("/v1/predictions", **_raw(_json_with(VANILLA, b'"condition": "another"'))).json()["error"]
        surrogate = http.post("/v1/spaces", **_raw(b'{"scenario": "\\ud800", "outcome1": "a", "outcome2": "b"}'))
    assert twice["message"] == ("the key 'condition' appears twice in the object (which value is meant cannot be "
                                "told)")
    assert surrogate.json()["error"]["message"].startswith("scenario is not valid UTF-8 text")


#: Input echoed in an error is cut to this many characters (docs/serve.md, Security).
ECHO_CHARS = 100


def test_input_echoed_in_an_error_is_cut_short(live):
    service, _ = live
    key = "k" * 500_000
    with service.client() as http:
        unknown = http.post("/v1/predictions", json={**CASE, key: 1})
        many = http.post("/v1/predictions", json={**CASE, **{f"unknown-{i}": 1 for i in range(5_000)}})
        path = http.get("/" + "p" * 60_000)
    assert unknown.status_code == 422 and len(unknown.content) < 2_000, len(unknown.content)
    error = unknown.json()["error"]
    assert error["field"] == "k" * ECHO_CHARS + "…" and error["errors"][0]["field"] == error["field"]
    assert many.status_code == 422 and len(many.content) < 5_000, len(many.content)
    assert "5,000 problems" in many.json()["error"]["message"]
    assert path.status_code == 404 and len(path.content) < 1_000, len(path.content)
    assert path.json()["error"]["message"].endswith("/" + "p" * (ECHO_CHARS - 1) + "…")


@pytest.mark.parametrize("path", ["/healthz", "/v1/methods", "/v1/jobs", "/v1/spaces", "/", "/metrics",
                                  "/openapi.json"])
def test_head_on_a_get_route_answers_as_get_without_a_body(live, path):
    service, _ = live
    with service.client() as http:
        got, head = http.get(path), http.head(path)
        post_only = http.head("/v1/predictions")
    assert head.status_code == got.status_code == 200
    assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]
    assert post_only.status_code == 405


def test_a_duplicate_id_in_a_list_points_at_the_case_that_had_it_first(live):
    service, _ = live
    cases = [{**CASE, "id": "a"}, {**CASE, "id": "b"}, {**CASE, "id": "a"}]
    with service.client() as http:
        error = http.post("/v1/predictions", json={"cases": cases, "method": "vanilla"}).json()["error"]
    assert error["field"] == "cases[2].id"
    assert "cases[0]" in error["message"] and "line" not in error["message"], error


def test_nothing_was_left_behind_by_refused_jobs(live):
    service, _ = live
    with service.client() as http:
        listed = http.get("/v1/jobs").json()
    jobs_folder = service.service.settings.state / "jobs"
    # Every folder is a job that was accepted (another test of this module may have sent one); the refused
    # ones (bad format, empty body, no usable row, ...) left nothing.
    assert {p.name for p in jobs_folder.iterdir()} == {j["id"] for j in listed["jobs"]}
    assert all(j["id"] in ("twice",) for j in listed["jobs"])


def test_metrics_are_prometheus_text_with_requests_latency_llm_and_queues(live):
    service, _ = live
    with service.client() as http:
        http.post("/v1/predictions", json={**VANILLA, "condition": "metrics check"})
        text = http.get("/metrics")
    assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = text.text.splitlines()
    samples = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines if not line.startswith("#")}
    assert samples['anchor_serve_http_requests_total{route="/v1/predictions",method="POST",status="200"}'] >= 1
    assert samples['anchor_serve_http_request_duration_seconds_count{route="/v1/predictions"}'] >= 1
    assert samples['anchor_serve_llm_requests_total{stage="baseline.vanilla",class="online",outcome="ok"}'] >= 1
    assert any(k.startswith("anchor_serve_llm_tokens_total{") for k in samples)
    for gauge in ("anchor_serve_llm_in_flight", "anchor_serve_online_pending", 'anchor_serve_jobs{state="running"}',
                  'anchor_serve_llm_waiting{class="batch"}'):
        assert gauge in samples, gauge
    assert all(re.match(r"^# (HELP|TYPE) |^[a-z_]+(\{.*\})? [0-9.e+-]+$|^[a-z_]+(\{.*\})? \+Inf$", line)
               for line in lines), [line for line in lines if "=" in line][:3]


def test_openapi_docs_list_every_route(live):
    service, _ = live
    with service.client() as http:
        spec = http.get("/openapi.json").json()
        docs = http.get("/docs")
    for path in ("/v1/predictions", "/v1/predictions/{prediction_id}", "/v1/predictions/{prediction_id}/explanation",
                 "/v1/spaces", "/v1/spaces/{space_id}", "/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/results",
                 "/healthz", "/metrics"):
        assert path in spec["paths"], path
    assert docs.status_code == 200 and "openapi.json" in docs.text


def test_cors_is_off_unless_an_origin_is_configured(live, tmp_path):
    service, server = live
    with service.client() as http:
        plain = http.get("/healthz", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in plain.headers
    with running(tmp_path / "state", server, cors_origins=("https://app.example",)) as other, other.client() as http:
        allowed = http.get("/healthz", headers={"Origin": "https://app.example"})
        refused = http.get("/healthz", headers={"Origin": "https://evil.example"})
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in refused.headers


def test_every_json_body_carries_a_schema_version(live):
    service, _ = live
    with service.client() as http:
        for path in ("/healthz", "/v1/methods", "/v1/spaces", "/v1/jobs"):
            assert http.get(path).json()["schema_version"] == 1, path
    assert json.loads(json.dumps(service.service.describe()))["methods"]



def test_a_second_service_on_the_same_state_folder_is_refused(live):
    import asyncio

    from anchor.errors import ConfigurationError
    from tests.serve.helpers import make_service

    service, server = live
    other = make_service(service.service.settings.state, server)
    with pytest.raises(ConfigurationError, match="another anchor serve uses this folder"):
        asyncio.run(other.start())


def test_a_job_id_in_use_is_a_conflict(live):
    service, _ = live
    body = {"content": b"outcome1,outcome2,condition\nIt rains.,It is dry.,Clouds.\n",
            "headers": {"Content-Type": "text/csv"}}
    with service.client() as http:
        first = http.post("/v1/jobs?method=vanilla&id=twice", **body)
        second = http.post("/v1/jobs?method=vanilla&id=twice", **body)
        wait_for(lambda: http.get("/v1/jobs/twice").json()["state"] == "done", what="the job")
    assert first.status_code == 202 and second.status_code == 409
    assert second.json()["error"]["field"] == "id"
