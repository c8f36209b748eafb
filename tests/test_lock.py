"""The project's environment is locked (requirements.lock, written by scripts/lock.sh): every package the
library or its set-up asks for is pinned there, at a version inside the range pyproject.toml asks for.
A dependency added to pyproject.toml without refreshing the lock fails here, not on a newcomer's machine."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
#: The extras `make venv` installs (the Makefile and scripts/lock.sh name the same).
LOCKED_EXTRAS = ("bird", "dev", "serve")
#: Built from source by scripts/install_llama.sh, pinned in constraints.txt, not in the lock.
BUILT_APART = {"llama-cpp-python"}


def lock_pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;#]+)", line)
        assert match, f"requirements.lock: not an exact pin: {line!r}"
        name = canonicalize_name(match.group(1))
        assert name not in pins, f"requirements.lock pins {name} twice"
        pins[name] = Version(match.group(2))
    return pins


def asked_for() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [Requirement(r) for r in project["dependencies"]]
    for extra in LOCKED_EXTRAS:
        wanted += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return wanted


def test_every_requirement_is_pinned_inside_its_range():
    pins = lock_pins()
    for req in asked_for():
        name = canonicalize_name(req.name)
        if name in BUILT_APART:
            continue
        assert name in pins, f"{req.name} is required (pyproject.toml) but not in requirements.lock: run make lock"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {req.name}=={pins[name]}, outside pyproject.toml's {req.specifier}: run make lock")


def test_the_hand_kept_pins_agree_with_the_lock():
    pins = lock_pins()
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name in BUILT_APART:
            continue
        assert name in pins and req.specifier.contains(pins[name]), (
            f"constraints.txt asks for {line}, requirements.lock has {pins.get(name)}")


def test_the_lock_leaves_out_the_editable_project_and_the_compiled_backend():
    pins = lock_pins()
    assert "anchor-infer" not in pins and not (BUILT_APART & set(pins))
