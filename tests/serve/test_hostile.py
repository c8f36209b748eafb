"""The service under hostile or unlucky clients (issue 46): labels of /metrics that no request can multiply,
uploads that race for the job queue, drop mid-way or are cut by `kill -9`, and a job's CSV results that
are its predict run's own table. Against a real server each time."""

from __future__ import annotations

import re

import pytest
from pydantic import SecretStr

from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import running, vanilla

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
KEY = "k3y-for-the-tests-0123456789abcdef"
#: The values the method label may take (docs/serve.md).
METHOD_LABELS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}


def test_metrics_labels_take_a_closed_set_of_values_whatever_the_requests(tmp_path):
    auth = {"Authorization": f"Bearer {KEY}"}
    with FakeOpenAIServer(responder=vanilla) as server, \
            running(tmp_path / "state", server, api_keys=(SecretStr(KEY),)) as live, live.client() as http:
        for i in range(300):  # refused for want of a key (401), on a route and on no route
            http.request(f"M{i}", "/v1/methods")
            http.request(f"M{i}", f"/nowhere/{i}")
        assert http.get("/openapi.json", headers=auth).status_code == 200
        assert http.get("/docs", headers=auth).status_code == 200
        text = http.get("/metrics", headers=auth).text
    series = [line.rsplit(" ", 1)[0] for line in text.splitlines()
              if line.startswith("anchor_serve_http_requests_total{")]
    methods = {re.search(r'method="([^"]*)"', s).group(1) for s in series}
    assert methods <= METHOD_LABELS, methods
    # Refused before routing (no key): on a route or not, one series.
    assert 'anchor_serve_http_requests_total{route="unmatched",method="other",status="401"}' in series
    assert 'anchor_serve_http_requests_total{route="/openapi.json",method="GET",status="200"}' in series
    assert 'anchor_serve_http_requests_total{route="/docs",method="GET",status="200"}' in series
    assert len(series) == 3, series  # 600 requests of 300 methods: no series of their own