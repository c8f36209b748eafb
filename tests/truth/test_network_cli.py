"""``anchor truth make --network`` from the command line: the world and cases files, the same bytes for the
same seed, the truth equal to pgmpy's variable elimination, the list of networks, and one-line errors that
name the flag."""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from anchor.cli import app
from anchor.truth.world import load_worlds
from tests.helpers import refused_in_one_line

pytest.importorskip("pgmpy")
pytestmark = pytest.mark.usefixtures("clean_anchor_env")
runner = CliRunner()


def make(tmp_path: Path, *args: str):  # noqa: ANN201
    return runner.invoke(app, ["truth", "make", *args, "--out", str(tmp_path / "w.json"),
                               "--cases", str(tmp_path / "w.csv")])


def test_make_writes_a_network_world_the_same_for_the_same_seed(tmp_path: Path) -> None:
    result = make(tmp_path, "--network", "earthquake,cancer", "--conditions", "12", "--seed", "4")
    assert result.exit_code == 0, result.output
    first = ((tmp_path / "w.json").read_bytes(), (tmp_path / "w.csv").read_bytes())
    assert "earthquake: 8 factors, network earthquake (5 of its 5 nodes), outcome Burglary = True" in result.stdout
    assert "cancer: p_true of 12 of 12 conditions cross-checked by anchor's own enumeration" in result.stderr
    file = load_worlds(tmp_path / "w.json")
    assert [w.id for w in file.worlds] == ["earthquake", "cancer"]
    assert file.generator["seed"] == 4 and file.generator["networks"] == ["earthquake", "cancer"]
    assert make(tmp_path, "--network", "earthquake", "--network", "cancer", "--conditions", "12",
                "--seed", "4").exit_code == 0
    assert ((tmp_path / "w.json").read_bytes(), (tmp_path / "w.csv").read_bytes()) == first
    with (tmp_path / "w.csv").open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24 and rows[0]["outcome1"] == "There has been a burglary at the house."
    assert [float(r["p_true"]) for r in rows] == [c.p_true for w in file.worlds for c in w.conditions]


def test_a_chosen_outcome_of_a_network_without_texts_is_pgmpys_truth(tmp_path: Path) -> None:
    from pgmpy.inference import VariableElimination
    from pgmpy.utils import get_example_model

    result = make(tmp_path, "--network", "alarm", "--outcome", "HYPOVOLEMIA=TRUE", "--conditions", "16")
    assert result.exit_code == 0, result.output
    assert "joint too large to enumerate" in result.stderr
    world = load_worlds(tmp_path / "w.json").worlds[0]
    assert world.id == "alarm-hypovolemia-true" and world.outcome1 == 'The variable "HYPOVOLEMIA" is "TRUE".'
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        infer = VariableElimination(get_example_model("alarm"))
    for cond in world.conditions:
        evidence = {world.factor(f).node: world.factor(f).state for f in cond.present}
        truth = infer.query(["HYPOVOLEMIA"], evidence=evidence or None, show_progress=False)
        assert abs(cond.p_true - float(truth.get_value(HYPOVOLEMIA="TRUE"))) <= 1e-9


def test_network_list_names_what_pgmpy_ships(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["truth", "make", "--network", "list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "asia  (texts written for it)" in lines and "alarm" in lines and len(lines) >= 20
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (["--network", "nosuch"], "--network nosuch: 'nosuch' is not a network pgmpy ships; available: alarm, "),
    (["--network", "asia", "--outcome", "lungs=yes"], "--outcome lungs=yes: asia has no node 'lungs'; its nodes: "
                                                      "asia, tub,"),
    (["--network", "asia", "--outcome", "lung=maybe"], "--outcome lung=maybe: asia: lung has no state 'maybe'; its "
                                                       "states: yes, no"),
    (["--network", "asia", "--outcome", "lung"], "--outcome lung: give the outcome as NODE=STATE"),
    (["--network", "asia,cancer", "--outcome", "lung=yes"], "--outcome lung=yes: give one --network with it"),
    (["--network", "asia", "--structure", "latent"], "--structure: not with --network"),
    (["--network", "asia", "--worlds", "3"], "--worlds: not with --network"),
    (["--network", "asia", "--prior", "0.3"], "--prior: not with --network"),
    (["--outcome", "lung=yes"], "--outcome lung=yes: only with --network"),
    (["--network", "asia", "--conditions", "2"], "Invalid value for '--conditions': must be in [4, 300] (got 2)"),
])
def test_bad_network_flags_are_one_line_errors_naming_the_flag(tmp_path: Path, args: list[str], message: str,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    refused_in_one_line(runner.invoke(app, ["truth", "make", *args]), message, tmp_path)


def test_help_names_the_network_flags() -> None:
    text = " ".join(runner.invoke(app, ["truth", "make", "--help"]).output.split())
    for words in ("--network", "--outcome", "NODE=STATE", "--network list"):
        assert words in text
