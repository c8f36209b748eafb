"""The planned case of the page tests: a factor space with real MiniLM vectors and the results of the
real pipeline (retrieval, voting, reflection, elicitation, NB/CBN) over a scripted backend whose answers
are planned below, so the numbers the pages must show are known in advance; and how the tests read a
page back.

Used by tests/audit/ (the pages of a space and an explanation, in Python and in a browser),
tests/evaluation/test_run_index.py (the index of a run directory) and tests/cli/test_explain_cli.py.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from anchor.config import AnchorConfig
from anchor.evaluation.datasets import scenario_key
from anchor.inference.bayes import cbn_posterior, naive_bayes_posterior
from anchor.llm.client import LLMClient
from anchor.llm.ledger import CostLedger
from anchor.llm.scripted import ScriptedBackend
from anchor.pipeline import Anchor
from anchor.rundir.records import Prediction, RunConfig
from anchor.space.io import save_space
from anchor.types import (
    AbductionRound,
    ClusteringStats,
    FactorSpace,
    InferenceResult,
    LabelVotes,
    PrunedFactor,
    RejectedCandidate,
    StageCost,
    StopReason,
)
from tests.conftest import build_space
from tests.helpers import ScriptedLLM

# --------------------------------------------------------------------------- the planned case

WT, BP, HT = "water temperature", "boiling point", "heat transfer rate"
KB, FP = "killing bacteria", "foodborne pathogens"
EB, GP = "electricity bill", "gas price"
NT = "noodle texture"
EVIL_FACTOR = "<script>alert('factor')</script> starch <b>release</b> https://example.org/x"
LABELS = {WT: "outcome1", BP: "outcome1", HT: "outcome1", KB: "outcome1", FP: "outcome1", EB: "outcome2",
          GP: "outcome2", NT: "neutral", EVIL_FACTOR: "neutral"}
VOTES = {WT: (3, 0, 0), BP: (2, 0, 1), KB: (3, 0, 0), GP: (0, 3, 0), EB: (1, 2, 0), NT: (1, 0, 2)}

HOT = "The water is brought to a rolling boil."
COLD = "The pot only holds lukewarm tap water and the gas is expensive."
EVIL = "<script>alert('condition')</script> a cat sleeps nearby"

# Selections per round (three rounds, threshold 2): for HOT the votes are WT 3, BP 2, KB 2, NT 1,
# so WT, BP and KB pass; reflection then drops BP.
SELECT = {HOT: [[WT, BP, KB], [WT, BP], [WT, KB, NT]], COLD: [[GP, EB]] * 3, EVIL: [[]] * 3}
REFLECT = {HOT: [WT, KB], COLD: [GP, EB]}
PHI = {WT: 0.85, KB: 0.7, GP: 0.3, EB: 0.25}
LATENT_OF = {WT: "Heat", KB: "Safety", GP: "Money", EB: "Money"}
LATENT_PARAMS = {"Heat": (0.9, 0.2), "Safety": (0.7, 0.4), "Money": (0.35, 0.6)}


def partition(texts: list[str]) -> list[dict]:
    groups: dict[str, list[str]] = {}
    for t in texts:
        groups.setdefault(LATENT_OF[t], []).append(t)
    return [{"name": name, "factors": members} for name, members in groups.items()]


def make_script() -> ScriptedLLM:
    pending = {cond: [list(a) for a in answers] for cond, answers in SELECT.items()}
    return ScriptedLLM(
        select=lambda cond, cands: pending[cond].pop(0),
        reflect=lambda cond, selected: list(REFLECT[cond]),
        phi=PHI.__getitem__,
        partition=partition,
        latent_params=lambda line: LATENT_PARAMS[line.split(" (")[0]],
    )


def expected_posteriors(texts: list[str]) -> tuple[float, float, float]:
    phis = [PHI[t] for t in texts]
    names = list(dict.fromkeys(LATENT_OF[t] for t in texts))
    nb = naive_bayes_posterior(phis)
    cbn = cbn_posterior(phis, [names.index(LATENT_OF[t]) for t in texts], [LATENT_PARAMS[n] for n in names])
    return nb, cbn, 0.5 * nb + 0.5 * cbn


def audit_space(embedder) -> FactorSpace:
    space = build_space(embedder, [("Water Temperature", [WT, BP, HT]), ("Food Safety", [KB, FP]),
                                   ("Energy Cost", [EB, GP])], [NT, EVIL_FACTOR], labels=LABELS)
    for f in space.factors:
        if f.text in VOTES:
            o1, o2, n = VOTES[f.text]
            f.votes = LabelVotes(outcome1=o1, outcome2=o2, neutral=n)
    ht = next(f for f in space.factors if f.text == HT)
    wt = next(f for f in space.factors if f.text == WT)
    cluster = space.clusters[0]
    cluster.factor_ids = [fid for fid in cluster.factor_ids if fid != ht.id]
    cluster.pruned = [PrunedFactor(factor_id=ht.id, text=HT, reason="redundant within its cluster",
                                   duplicate_of=wt.id)]
    ht.cluster_id = None
    space.rounds = [
        AbductionRound(round=1, sentences=["s"] * 10, extracted=["e"] * 8, added=["a"] * 6,
                       rejected=[RejectedCandidate(text="x", reason="duplicate"),
                                 RejectedCandidate(text="y", reason="irrelevant")]),
        AbductionRound(round=2, sentences=["s"] * 10, extracted=["e"] * 4, added=["a"] * 3,
                       rejected=[RejectedCandidate(text="z", reason="near_duplicate")]),
    ]
    space.stop_reason = StopReason.SATURATED
    space.clustering = ClusteringStats(method="umap+hdbscan", n_factors=9, n_clusters=3, n_unclustered=2,
                                       silhouette=0.4321, umap_n_components=5, umap_n_neighbors=7,
                                       hdbscan_min_cluster_size=2, seed=11, note="small space")
    space.cost = [StageCost(stage="abduction.generate", llm_calls=2, prompt_tokens=900, completion_tokens=410,
                            llm_seconds=3.25),
                  StageCost(stage="voting", llm_calls=4, failed_attempts=1, cache_hits=2, prompt_tokens=300,
                            completion_tokens=60, llm_seconds=1.5)]
    return space


def build_case(embedder) -> tuple[FactorSpace, list[InferenceResult], LLMClient]:
    """(space, [HOT, COLD, EVIL results], the scripted client): the pipeline run on the planned space."""
    space = audit_space(embedder)
    script = make_script()
    client = LLMClient(ScriptedBackend(script), cache=None, ledger=CostLedger())
    # The paper's rule: the expected posteriors below are its arithmetic.
    results = Anchor(client=client, embedder=embedder, config=AnchorConfig()).infer(space, [HOT, COLD, EVIL])
    return space, results, client


# --------------------------------------------------------------------------- reading pages back


class _Finder(HTMLParser):
    """Collects the visible text of every element whose attribute ``attr`` equals ``value`` (a
    space is put at each tag, so table cells read 'a b c'; SVG hover titles are left out)."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self, attr: str, value: str | None) -> None:
        super().__init__(convert_charrefs=True)
        self.attr, self.value = attr, value
        self.depth = 0
        self.parts: list[str] = []
        self.found: list[str] = []
        self.in_title = False

    def handle_starttag(self, tag, attrs):  # noqa: ANN001
        if tag in self.VOID:
            return
        if self.depth:
            self.depth += 1
            self.parts.append(" ")
            self.in_title = tag == "title"
        elif self.attr in dict(attrs) and (self.value is None or dict(attrs)[self.attr] == self.value):
            self.depth, self.parts = 1, []

    def handle_endtag(self, tag):  # noqa: ANN001
        if tag in self.VOID or not self.depth:
            return
        self.depth -= 1
        self.in_title = False
        self.parts.append(" ")
        if self.depth == 0:
            self.found.append(" ".join("".join(self.parts).split()))

    def handle_data(self, data):  # noqa: ANN001
        if self.depth and not self.in_title:
            self.parts.append(data)


def texts(html_text: str, attr: str, value: str | None = None) -> list[str]:
    finder = _Finder(attr, value)
    finder.feed(html_text)
    return finder.found


def one(html_text: str, attr: str, value: str) -> str:
    found = texts(html_text, attr, value)
    assert len(found) == 1, (attr, value, found)
    return found[0]


def section(html_text: str, ident: str) -> str:
    """The raw HTML of <section id=ident> (for markup checks)."""
    m = re.search(rf'<section[^>]*id="{re.escape(ident)}".*?</section>', html_text, re.S)
    assert m, ident
    return m.group(0)


# --------------------------------------------------------------------------- self-contained, escaped


EXTERNAL = re.compile(r"https?://|\bsrc=|<link\b|@import|url\(|<img\b|<iframe\b|<object\b|<embed\b", re.I)
LOCAL_HREF = re.compile(r"(#[\w-]+|(\.\./|explain/)?[\w.-]+\.html(#[\w-]+)?)")


def assert_self_contained(html_text: str) -> None:
    """Nothing the browser would fetch: no URL scheme, no src, stylesheet link, import, url(),
    embedded object; and every link an in-page anchor or a sibling page."""
    assert not EXTERNAL.search(html_text), EXTERNAL.search(html_text)
    for href in re.findall(r'href="([^"]*)"', html_text):
        assert LOCAL_HREF.fullmatch(href), href


# --------------------------------------------------------------------------- the run index


def run_config(kind: str = "pairwise", **kw) -> RunConfig:
    dataset = {"pairwise": "common2sense-pairwise", "decision": "plasma", "factcheck": "factcheck"}[kind]
    fields = dict(anchor_version="0.1.0", dataset=dataset, data_sha256="0" * 64, kind=kind, method="anchor",
                  runs=1, seed=0, llm={"backend": "openai-compatible", "base_url": "http://127.0.0.1:9/v1",
                                       "model": "served-model"})
    fields.update(kw)
    return RunConfig(**fields)


def p_gold(result: InferenceResult) -> float | None:
    return result.p_outcome1  # gold outcome 1 throughout


def trace_line(run: int, iid: str, side: int, result: InferenceResult, key: str | None) -> str:
    return json.dumps({"run": run, "id": iid, "side": side, "condition": result.condition, "space": key,
                       "result": result.model_dump(mode="json")})


def write_run_dir(case, tmp_path: Path) -> Path:
    """A pairwise run directory written by hand: p1 correct, p2 wrong, p3 unknown (one side has no
    factors), p4 an LLM failure without traces; traces.jsonl also holds a superseded line for p1 and
    a torn last line."""
    space, (hot, cold, evil), _ = case
    key = scenario_key(space.scenario)
    d = tmp_path / "run"
    save_space(space, d / "spaces" / f"{key}.json")
    (d / "config.json").write_text(run_config().model_dump_json(indent=2), encoding="utf-8")
    preds = [
        Prediction(run=0, id="p1", seed=0, kind="pairwise", human=1, gold=1, p_gold_1=p_gold(hot),
                   p_gold_2=p_gold(cold), prediction=1),
        Prediction(run=0, id="p2", seed=0, kind="pairwise", human=2, gold=1, p_gold_1=p_gold(hot),
                   p_gold_2=p_gold(cold), prediction=1),
        Prediction(run=0, id="p3", seed=0, kind="pairwise", human=3, gold=1, p_gold_1=None, p_gold_2=p_gold(cold),
                   unknown=True, status="abstained", error=evil.unknown_reason),
        Prediction(run=0, id="p4 <odd>/id", seed=0, kind="pairwise", human=1, gold=1, unknown=True,
                   status="failed", error="the model answered out of schema: <b>oops</b>"),
    ]
    (d / "predictions.jsonl").write_text("".join(p.model_dump_json() + "\n" for p in preds), encoding="utf-8")
    lines = [trace_line(0, "p1", 0, evil, key),  # superseded by the next p1/side-0 line
             trace_line(0, "p1", 0, hot, key), trace_line(0, "p1", 1, cold, key),
             trace_line(0, "p2", 0, hot, key), trace_line(0, "p2", 1, cold, key),
             trace_line(0, "p3", 0, evil, key), trace_line(0, "p3", 1, cold, key)]
    (d / "traces.jsonl").write_text("\n".join(lines) + "\n" + '{"run": 0, "id": "p9", "si', encoding="utf-8")
    return d


def rows_of(html_text: str) -> list[tuple[str, str]]:
    """(data-status, row text) of every row of the index table."""
    body = re.search(r'<table class="runs" id="rows">.*?</table>', html_text, re.S).group(0)
    statuses = re.findall(r'<tr class="\w+" data-status="(\w+)" data-state="\w+">', body)
    return list(zip(statuses, texts(body, "data-status"), strict=True))


# --------------------------------------------------------------------------- in a real browser

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]


class Rendered:
    def __init__(self, dom: str, console: list[str], page_requests: list[str]) -> None:
        self.dom, self.console, self.page_requests = dom, console, page_requests


def render(url: str, tmp_path: Path, *, screenshot: Path | None = None) -> Rendered:
    """Load ``url`` in headless Chromium: the DOM after scripts ran, the page's console messages,
    and every network request the page itself started (Chromium's own background traffic has no
    page origin and is left out)."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    netlog = profile.with_suffix(".netlog.json")
    base = [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--log-net-log={netlog}"]
    proc = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    log = json.loads(netlog.read_text(encoding="utf-8"))
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    requests = [e["params"]["url"] for e in log["events"]
                if e["type"] == start_job and e.get("params", {}).get("initiator", "not an origin") != "not an origin"]
    if screenshot is not None:
        shot = subprocess.run([*base, "--window-size=1280,2400", f"--screenshot={screenshot}", url],
                              capture_output=True, text=True, timeout=120, check=False)
        assert shot.returncode == 0 and screenshot.exists(), shot.stderr[-2000:]
    return Rendered(proc.stdout, console, requests)


def dom_via_devtools(url: str, tmp_path: Path, *, javascript: bool) -> str:
    """The DOM of ``url`` after loading, with JavaScript on or off. ``--dump-dom`` cannot be used
    with scripts off (it returns nothing then), so this talks the DevTools protocol over a pipe:
    Emulation.setScriptExecutionDisabled, Page.navigate, DOM.getOuterHTML."""
    profile = tmp_path / f"devtools-{len(list(tmp_path.glob('devtools-*')))}"
    to_read, to_write = os.pipe()
    from_read, from_write = os.pipe()
    args = [CHROMIUM, *CHROMIUM_FLAGS[:-2], f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
    # Chromium reads commands on fd 3 and answers on fd 4 (bash: dash cannot redirect fds >= 10).
    proc = subprocess.Popen(["bash", "-c", f'exec "$0" "$@" 3<&{to_read} 4>&{from_write}', *args],
                            pass_fds=(to_read, from_write), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_read)
    os.close(from_write)
    pending = b""
    counter = 0
    deadline = time.monotonic() + 90

    def send(method: str, params: dict | None = None, session: str | None = None) -> int:
        nonlocal counter
        counter += 1
        message = {"id": counter, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(to_write, json.dumps(message).encode() + b"\0")
        return counter

    def wait_for(wanted) -> dict:  # noqa: ANN001
        nonlocal pending
        while True:
            while b"\0" in pending:
                raw, pending = pending.split(b"\0", 1)
                message = json.loads(raw)
                if wanted(message):
                    return message
            left = deadline - time.monotonic()
            assert left > 0 and select.select([from_read], [], [], left)[0], "Chromium did not answer in time"
            chunk = os.read(from_read, 1 << 16)
            assert chunk, "Chromium closed the DevTools pipe"
            pending += chunk

    def call(method: str, params: dict | None = None, session: str | None = None) -> dict:
        ident = send(method, params, session)
        answer = wait_for(lambda m: m.get("id") == ident)
        assert "error" not in answer, answer
        return answer["result"]

    try:
        target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        call("Emulation.setScriptExecutionDisabled", {"value": not javascript}, session)
        call("Page.enable", {}, session)
        call("Page.navigate", {"url": url}, session)
        wait_for(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == session)
        root = call("DOM.getDocument", {"depth": -1}, session)["root"]["nodeId"]
        return call("DOM.getOuterHTML", {"nodeId": root}, session)["outerHTML"]
    finally:
        try:
            send("Browser.close")
        except OSError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(to_write)
        os.close(from_read)


def assert_drawn(png: Path) -> None:
    """The screenshot is a real picture: not blank, with more than a handful of colours."""
    from PIL import Image

    with Image.open(png) as im:
        pixels = np.asarray(im.convert("RGB"))
    assert pixels.shape[0] >= 1000 and pixels.std() > 10
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 50
