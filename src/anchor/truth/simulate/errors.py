"""The simulated LLM's errors: what kind, how large, and where its randomness comes from.

Every parameter of :class:`SimErrors` has a default that stands for "a decent LLM";
:meth:`SimErrors.zero` is the oracle, which answers every prompt with the truth. Probabilities an
LLM states go through a :class:`Miscalibration` curve on the log-odds: one curve for factor-level
answers (phi, latent parameters) and another, set apart on purpose, for holistic answers (vanilla,
CoT, logits, compare, the factor-based oracle), so that "holistic judgements are worse than
factor-level ones" is a parameter one can sweep rather than an assumption.

Randomness never comes from global state. Two kinds of draw exist:

* *per request* (:func:`request_rng`): seeded by sha256 of the simulator's seed, the world, the
  stage, the request's messages and schema, the request's own seed and a purpose tag. The same
  request therefore always gets the same answer (a response cache stays valid), and sample ``i`` of
  a self-consistency vote (sent with seed ``base + i``) is a different draw;
* *per world* (:func:`world_rng`): seeded by the simulator's seed, the world and a purpose only,
  for the LLM's systematic errors: which factors it knows and which it invents.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: Where a probability with step 0 is kept: strictly inside (0, 1), as an LLM never states 0 or 1
#: through this curve (and a log-probability of 0 or 1 would be infinite).
OPEN_EDGE = 1e-9


class Miscalibration(BaseModel):
    """How a stated probability departs from the true one: ``logit(p') = slope * logit(p) + bias +
    noise * N(0, 1)``, then rounded to ``step`` (near 0 and 1 to one significant digit).

    The curve itself (slope, bias) is systematic: the same true value always bends the same way.
    The noise is drawn per request. With slope 1, bias 0 and noise 0 the value passes unchanged
    (no round trip through the log-odds), so an oracle's answers are exact.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    slope: float = Field(default=1.0, ge=0.0, description="Multiplies the true log-odds: above 1 the stated "
                                                            "probabilities are sharper (overconfident), below 1 "
                                                            "flatter (underconfident), 0 always says 0.5 (+ bias).")
    bias: float = Field(default=0.0, description="Added to the log-odds: above 0 leans every answer towards "
                                                 "outcome 1, below 0 towards outcome 2.")
    noise: float = Field(default=0.3, ge=0.0, description="Standard deviation of the Gaussian noise added to the "
                                                          "log-odds, drawn afresh for every request.")
    step: float = Field(default=0.05, ge=0.0, lt=0.5, description="Stated probabilities are rounded to multiples "
                                                                   "of this (LLMs say 0.7, not 0.6931), and within "
                                                                   "it of 0 or 1 to one significant digit (0.01, not "
                                                                   "0.05, for a rare event); 0 = no rounding, kept "
                                                                   "strictly inside (0, 1).")

    @property
    def exact(self) -> bool:
        """Whether values pass unchanged (the oracle's curve)."""
        return self.slope == 1.0 and self.bias == 0.0 and self.noise == 0.0 and self.step == 0.0

    def apply(self, p: float, rng: random.Random | None) -> float:
        """The stated value for the true probability ``p``; ``rng`` draws the noise (needed when
        ``noise`` > 0)."""
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"probability {p!r} outside [0, 1]")
        if self.slope == 1.0 and self.bias == 0.0 and self.noise == 0.0:
            out = p
        else:
            q = min(max(p, OPEN_EDGE), 1.0 - OPEN_EDGE)
            z = self.slope * math.log(q / (1.0 - q)) + self.bias
            if self.noise > 0.0:
                if rng is None:
                    raise ValueError("a noisy curve needs a random source")
                z += self.noise * rng.gauss(0.0, 1.0)
            out = _sigmoid(z)
        if self.step > 0.0:
            return _stated(out, self.step)
        return min(max(out, OPEN_EDGE), 1.0 - OPEN_EDGE)


def _stated(p: float, step: float) -> float:
    """``p`` as an LLM states it: to a multiple of ``step``, and within ``step`` of 0 or 1 to one significant
    digit of its distance from there (a rare event is "0.01" or "0.002", not "0.05"), never 0 or 1."""
    if step <= p <= 1.0 - step:
        out = round(round(p / step) * step, 10)
        return min(max(out, step), round(1.0 - step, 10))
    tail = min(p, 1.0 - p)
    small = max(float(f"{tail:.0e}"), 1e-6)  # one significant digit, at least one in a million
    small = min(small, step)
    return small if p < 0.5 else round(1.0 - small, 12)


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


PhiReading = Literal["posterior", "latent-link"]


class SimErrors(BaseModel):
    """The size of each kind of error the simulated LLM makes (defaults: a decent LLM)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    factor_recall: float = Field(default=0.9, ge=0.0, le=1.0, description=(
        "Share of the world's factors the LLM can ever name in abduction (a fixed subset per world, "
        "round(share * n) factors); the others are never generated, so they never enter a factor space."))
    hallucination_rate: float = Field(default=0.1, ge=0.0, le=5.0, description=(
        "Invented factors, as a share of the world's factor count (round(rate * n) per world): plausible but "
        "absent, the factors of the world's own domain in the bank that it does not use (a hand-made world: "
        "unrelated phrases); the LLM names them like real ones and believes them (P(O1 | f) = 0.5)."))
    vote_flip_rate: float = Field(default=0.1, ge=0.0, le=1.0, description=(
        "Each sampled vote label is replaced by one of the two other labels (chosen evenly) at this rate."))
    map_recall: float = Field(default=0.9, ge=0.0, le=1.0, description=(
        "In one selection round, each candidate that the condition truly makes present is selected at this rate."))
    map_false_rate: float = Field(default=0.05, ge=0.0, le=1.0, description=(
        "In one selection round, each other candidate is selected at this rate."))
    reflect_catch: float = Field(default=0.5, ge=0.0, le=1.0, description=(
        "Reflection removes each wrongly selected factor at this rate; truly present ones are always kept."))
    factor_curve: Miscalibration = Field(default_factory=Miscalibration, description=(
        "The miscalibration of factor-level probabilities: elicited phi and latent parameters."))
    base_rate_curve: Miscalibration = Field(default_factory=Miscalibration, description=(
        "The miscalibration of the scenario's base rate P(O1), asked once per scenario by the consistent "
        "estimator (one draw of its noise per scenario: a systematic error of every answer there)."))
    direct_curve: Miscalibration = Field(default_factory=Miscalibration, description=(
        "The miscalibration of holistic estimates: vanilla, CoT, logits, compare and the factor-based oracle (by "
        "default the factor-level curve: no side is given a better-calibrated LLM than the other)."))
    direct_miss_rate: float = Field(default=0.1, ge=0.0, le=1.0, description=(
        "The direct baselines' reading of a condition: each factor it states is missed at this rate (as ANCHOR's "
        "one selection round misses a stated candidate at 1 - map_recall)."))
    direct_invent_rate: float = Field(default=0.05, ge=0.0, le=1.0, description=(
        "The direct baselines' reading of a condition: each other factor of the world is read as stated at this "
        "rate (as ANCHOR's one selection round picks a candidate the condition does not state at map_false_rate)."))
    phi_reading: PhiReading = Field(default="posterior", description=(
        "What an exact phi answer is: 'posterior' = P(O1 | f present), what the prompt asks; 'latent-link' = "
        "P(f present | its latent in the O1-leaning state), the number ANCHOR's network uses as phi (the two "
        "differ only in latent worlds)."))
    grouping_error: float = Field(default=0.1, ge=0.0, le=1.0, description=(
        "In latent discovery, each factor is put into a wrong group at this rate."))

    @classmethod
    def zero(cls) -> SimErrors:
        """No error at all: every answer is the truth (the oracle)."""
        exact = Miscalibration(slope=1.0, bias=0.0, noise=0.0, step=0.0)
        return cls(factor_recall=1.0, hallucination_rate=0.0, vote_flip_rate=0.0, map_recall=1.0,
                   map_false_rate=0.0, reflect_catch=1.0, factor_curve=exact, base_rate_curve=exact,
                   direct_curve=exact, direct_miss_rate=0.0, direct_invent_rate=0.0, phi_reading="posterior",
                   grouping_error=0.0)


def _digest(parts: list[Any]) -> int:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return int.from_bytes(hashlib.sha256(blob.encode("utf-8")).digest()[:8], "big")


def world_rng(seed: int, world_id: str, purpose: str) -> random.Random:
    """A random source for a systematic error of one world (the same in every request)."""
    return random.Random(_digest(["world", seed, world_id, purpose]))


def request_rng(seed: int, world_id: str, stage: str, messages: list[dict[str, str]],
                schema: dict[str, Any] | None, request_seed: int | None, purpose: str) -> random.Random:
    """A random source for one request's draws of one kind (``purpose``)."""
    return random.Random(_digest(["request", seed, world_id, stage, messages, schema, request_seed, purpose]))


# --------------------------------------------------------------------------- errors from files and flags

#: The schema version an errors file may state (a file without one is read as this version).
ERRORS_SCHEMA_VERSION = 1


class SimErrorsInvalid(ValueError):
    """Errors that cannot be read: a file that is not a SimErrors object, or a setting that is not one."""


def errors_from(base: SimErrors, data: dict[str, Any], where: str) -> SimErrors:
    """``base`` with the settings in ``data`` (field -> value; a curve as an object of its own fields)."""
    merged = base.model_dump()
    for name, value in data.items():
        if name not in SimErrors.model_fields:
            raise SimErrorsInvalid(f"{where}: unknown error parameter {name!r} (known: "
                                   f"{', '.join(SimErrors.model_fields)})")
        if isinstance(value, dict) and isinstance(merged.get(name), dict):
            merged[name] = {**merged[name], **value}
        else:
            merged[name] = value
    try:
        return SimErrors.model_validate(merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise SimErrorsInvalid(f"{where}: {field}: {first['msg']}") from None


def load_errors(path: str, base: SimErrors | None = None) -> SimErrors:
    """Errors from a JSON file holding some or all of SimErrors' fields (the rest from ``base``,
    else the defaults); an optional ``schema_version`` must be this version's."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SimErrorsInvalid(f"--errors {path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SimErrorsInvalid(f"--errors {path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise SimErrorsInvalid(f"--errors {path}: an errors file is a JSON object of error parameters")
    version = data.pop("schema_version", ERRORS_SCHEMA_VERSION)
    if version != ERRORS_SCHEMA_VERSION:
        raise SimErrorsInvalid(f"--errors {path}: schema_version {version!r}, this anchor reads "
                               f"{ERRORS_SCHEMA_VERSION}")
    return errors_from(base or SimErrors(), data, f"--errors {path}")


def errors_with_settings(base: SimErrors, settings: list[str]) -> SimErrors:
    """``base`` with ``NAME=VALUE`` settings (``--set factor_recall=0.5``, ``--set direct_curve.noise=0.8``);
    values are read as JSON where they parse (numbers), else as text (``phi_reading=latent-link``)."""
    data: dict[str, Any] = {}
    for setting in settings:
        name, sep, raw = setting.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise SimErrorsInvalid(f"--set {setting!r}: expected NAME=VALUE, e.g. --set factor_recall=0.5")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw.strip()
        field, dot, part = name.partition(".")
        if dot:
            data.setdefault(field, {})
            if not isinstance(data[field], dict):
                raise SimErrorsInvalid(f"--set {setting!r}: {field} was set whole and by part")
            data[field][part] = value
        else:
            data[field] = value
    return errors_from(base, data, "--set")
