"""The live page in a real browser (headless Chromium): a running job with its progress, the latest answers,
and links that open the explanation pages; no console error, nothing fetched from elsewhere. Skipped, saying
why, where Chromium is not installed."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.audit.planned_case import needs_chromium, render, texts
from tests.fakeserver import FakeOpenAIServer
from tests.serve.helpers import SCENARIO, cases_csv, running, wait_for

pytestmark = pytest.mark.usefixtures("clean_anchor_env")
#: Where to keep the screenshot (read before the fixture clears the ANCHOR_ variables).
SHOTS = os.environ.get("ANCHOR_SCREENSHOT_DIR")


@needs_chromium
def test_the_live_page_shows_a_running_job_and_opens_explanations(tmp_path):
    shots = Path(SHOTS or tmp_path)
    cases = cases_csv(tmp_path / "cases.csv", [f"Condition {i}: the weather changes." for i in range(8)])
    with FakeOpenAIServer(deterministic=True) as server, running(tmp_path / "state", server) as live, \
            live.client() as http:
        assert http.post("/v1/spaces", json={**SCENARIO, "wait": 300}).status_code == 200
        online = http.post("/v1/predictions", json={**SCENARIO, "condition": "It is <b>sunny</b> & warm."}).json()
        server.hold(after=server.completions + 12)  # a row or two of the job, then it waits, running
        try:
            job = http.post("/v1/jobs?id=browser-job", content=cases.read_bytes(),
                            headers={"Content-Type": "text/csv"}).json()
            wait_for(lambda: http.get("/v1/jobs/browser-job").json()["progress"]["rows_done"] >= 1 and server.held > 0,
                     what="a running job with rows answered")
            done = http.get("/v1/jobs/browser-job").json()["progress"]["rows_done"]
            home = render(live.url + "/", tmp_path, screenshot=shots / "serve.png")
            job_page = render(live.url + "/jobs/browser-job", tmp_path)
            row_links = re.findall(r'href="(/v1/jobs/browser-job/rows/[^"]+/explanation)"', job_page.dom)
            assert row_links
            row_page = render(live.url + row_links[0].replace("&amp;", "&"), tmp_path)
            answer_page = render(live.url + online["links"]["explanation"], tmp_path)
        finally:
            server.release()
    assert job["state"] in ("queued", "running")
    for seen in (home, job_page, row_page, answer_page):
        assert seen.console == [], seen.console
        assert all(url.startswith(live.url) for url in seen.page_requests), seen.page_requests
    row = re.search(r'<tr data-job="browser-job">.*?</tr>', home.dom, re.S).group(0)
    assert "running" in texts(row, "data-field", "state")[0]
    shown = int(re.search(r'<progress value="(\d+)" max="8">', row).group(1))
    assert 1 <= done <= shown < 8 and f"{shown} / 8 rows" in row  # rows keep finishing until the server holds
    assert f'href="{online["links"]["explanation"]}"' in home.dom
    assert "It is &lt;b&gt;sunny&lt;/b&gt; &amp; warm." in home.dom  # escaped, shown as text
    assert "Job browser-job, row c" in row_page.dom and "Naive Bayes" in row_page.dom
    assert f"Prediction {online['id']}" in answer_page.dom and "Naive Bayes" in answer_page.dom
