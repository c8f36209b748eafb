"""The service under hostile or unlucky clients (issue 46): labels of /metrics that no request can multiply,
uploads that race for the job queue, drop mid-way or are cut by `kill -9`, and a job's CSV results that
are its predict run's own table. Against a real server each time."""

from __future__ import annotations

import importlib.util
import re
import signal
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from pydantic import SecretStr

from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import SCENARIO, ServeProcess, cases_csv, running, vanilla, wait_for

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
KEY = "k3y-for-the-tests-0123456789abcdef"
#: The values the method label may take (docs/serve.md).
METHOD_LABELS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}


def open_upload(url: str, path: str, length: int, first: bytes, media: str = "text/csv") -> socket.socket:
    """A POST of ``length`` bytes whose first part (headers and ``first``) is sent, the rest not yet."""
    where = urlsplit(url)
    sock = socket.create_connection((where.hostname, where.port), timeout=120)
    head = (f"POST {path} HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Type: {media}\r\n"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n")
    sock.sendall(head.encode() + first)
    return sock


def finish_upload(sock: socket.socket, rest: bytes) -> int:
    """Send the rest of an upload opened by :func:`open_upload`; the status of the answer."""
    sock.sendall(rest)
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    sock.close()
    return int(answer.split(b" ", 2)[1])


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
    assert 'anchor_serve_http_requests_total{route="/openapi.json",method="GET",status="200"}' in series
    assert 'anchor_serve_http_requests_total{route="/docs",method="GET",status="200"}' in series
    if importlib.util.find_spec("httptools") is not None:
        # uvicorn's httptools parser (the serve extra's uvicorn[standard]) answers a method HTTP does not
        # define with 400 itself: the service never sees those 600 requests.
        assert len(series) == 2, series
    else:
        # h11 lets any token through: refused before routing (no key), on a route or not, one series.
        assert 'anchor_serve_http_requests_total{route="unmatched",method="other",status="401"}' in series
        assert len(series) == 3, series  # 600 requests of 300 methods: no series of their own


def test_uploads_racing_for_the_last_place_in_the_job_queue_get_429_while_it_is_held(tmp_path):
    """``--max-queued-jobs 1``: a job whose file is being read holds the one place; five more sent meanwhile
    are refused before their files are read, and the first is accepted when its file is whole."""
    body = cases_csv(tmp_path / "cases.csv", [f"Condition {i}." for i in range(20)]).read_bytes()
    with FakeOpenAIServer(responder=vanilla) as server, \
            running(tmp_path / "state", server, max_queued_jobs=1) as live, live.client() as http:
        jobs = tmp_path / "state" / "jobs"
        held = open_upload(live.url, "/v1/jobs?method=vanilla&id=first", len(body), body[:100])
        wait_for(lambda: (jobs / "first").is_dir(), what="the first upload to be read")
        others = [http.post(f"/v1/jobs?method=vanilla&id=other-{i}", content=body,
                            headers={"Content-Type": "text/csv"}) for i in range(5)]
        first = finish_upload(held, body[100:])
        listed = http.get("/v1/jobs").json()["jobs"]
    assert [o.status_code for o in others] == [429] * 5 and first == 202
    assert {o.json()["error"]["code"] for o in others} == {"busy"}
    assert [j["id"] for j in listed] == ["first"]
    assert sorted(p.name for p in jobs.iterdir()) == ["first"]  # the refused ones wrote nothing


def _serve(tmp_path: Path, server: FakeOpenAIServer) -> ServeProcess:
    process = ServeProcess(["--base-url", server.base_url, "--state", str(tmp_path / "state"),
                            "--cache-dir", str(tmp_path / "cache")])
    process.wait_ready()
    return process


def test_a_client_that_drops_mid_upload_is_one_log_line_and_leaves_nothing(tmp_path):
    body = cases_csv(tmp_path / "cases.csv", [f"Condition {i}." for i in range(20)]).read_bytes()
    with FakeOpenAIServer(responder=vanilla) as server:
        process = _serve(tmp_path, server)
        try:
            dropped = open_upload(process.url, "/v1/jobs?method=vanilla&id=dropped", len(body) + 10_000, body)
            wait_for(lambda: (tmp_path / "state" / "jobs" / "dropped").is_dir(), what="the upload to be read")
            dropped.close()
            wait_for(lambda: not (tmp_path / "state" / "jobs" / "dropped").exists(), what="the folder to go")
            half_json = open_upload(process.url, "/v1/predictions", 1000, b'{"condition": "cut sh', "application/json")
            half_json.close()  # a JSON body dropped: a 400, and no traceback either
            wait_for(lambda: any('"route": "/v1/predictions"' in line for line in process.stderr), what="its log")
            with process.client() as http:  # a request after it: its log line comes after the drop's lines
                assert http.get("/healthz").status_code == 200
            wait_for(lambda: any('"route": "/healthz"' in line for line in process.stderr), what="the log")
        finally:
            process.stop()
    logged = [line for line in process.stderr if '"route": "/healthz"' not in line]
    assert not any("Traceback" in line or "unforeseen" in line for line in logged), "".join(logged)[-3000:]
    about = [line for line in logged if "dropped" in line or "closed the connection" in line]
    upload_lines = [line for line in about if '"route":' not in line]  # the access log's own line aside
    assert len(upload_lines) == 1, about
    assert "closed the connection" in upload_lines[0] and "dropped" in upload_lines[0]


def test_an_upload_cut_by_kill_9_leaves_no_orphan_and_its_id_is_free_again(tmp_path):
    body = cases_csv(tmp_path / "cases.csv", [f"Condition {i}." for i in range(20)]).read_bytes()
    folder = tmp_path / "state" / "jobs" / "cut"
    with FakeOpenAIServer(responder=vanilla) as server:
        first = _serve(tmp_path, server)
        try:
            upload = open_upload(first.url, "/v1/jobs?method=vanilla&id=cut", len(body) + 10_000, body)
            wait_for(lambda: (folder / "cases.csv").is_file(), what="the upload to be written")
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(30)
            upload.close()
        finally:
            first.stop()
        assert (folder / "cases.csv").exists() and not (folder / "job.json").exists()  # as kill -9 left it
        second = _serve(tmp_path, server)
        try:
            with second.client() as http:
                before = http.get("/v1/jobs/cut")
                again = http.post("/v1/jobs?method=vanilla&id=cut", content=body, headers={"Content-Type": "text/csv"})
                assert before.status_code == 404 and again.status_code == 202, again.text  # the two routes agree
                wait_for(lambda: http.get("/v1/jobs/cut").json()["state"] == "done", what="the job")
        finally:
            second.stop()
    assert any("cut" in line and "removed" in line for line in second.stderr), "".join(second.stderr)[-2000:]


def test_csv_results_are_the_jobs_own_table_with_p_true_when_the_cases_carry_it(tmp_path):
    lines = ["id,scenario,outcome1,outcome2,condition,p_true"]
    lines += [f"t{i},{SCENARIO['scenario']},{SCENARIO['outcome1']},{SCENARIO['outcome2']},Condition {i}.,0.{i + 1}"
              for i in range(6)]
    with FakeOpenAIServer(responder=vanilla) as server, running(tmp_path / "state", server) as live, \
            live.client() as http:
        sent = http.post("/v1/jobs?method=vanilla&id=truth", content="\n".join(lines).encode() + b"\n",
                         headers={"Content-Type": "text/csv"})
        assert sent.status_code == 202, sent.text
        wait_for(lambda: http.get("/v1/jobs/truth").json()["state"] == "done", what="the job")
        table = http.get("/v1/jobs/truth/results", params={"format": "csv"}).text
    own = (tmp_path / "state" / "jobs" / "truth" / "run" / "predictions.csv").read_text(encoding="utf-8")
    assert table.splitlines()[0].split(",")[:4] == ["id", "line", "label", "p_true"]
    assert table == own
