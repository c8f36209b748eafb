"""The JSON bodies the service reads, as pydantic models (FastAPI checks types and names from them; the
cases' own rules, the same as a cases file's, are checked by :mod:`anchor.serve.online`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from anchor.cases import MAX_CONDITION_CHARS, MAX_SCENARIO_CHARS

ID_HELP = "Letters, digits, '.', '_' and '-' (at most 128, starting with a letter or digit)."
WAIT_HELP = ("Seconds to hold the request open for the answer (0: answer at once with 202 and where to poll). "
             "Default: the service's --wait.")


class CaseIn(BaseModel):
    """One case: a scenario (may be empty), its two outcomes and the condition."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(default=None, description=f"The case's id. {ID_HELP} Default: a new one.")
    scenario: str = Field(default="", description=f"The situation (at most {MAX_SCENARIO_CHARS:,} characters).")
    outcome1: str = Field(description="The first outcome.")
    outcome2: str = Field(description="The competing outcome (another text than outcome1).")
    condition: str = Field(description=f"The condition (at most {MAX_CONDITION_CHARS:,} characters).")


class PredictionRequest(BaseModel):
    """One case given inline (``scenario``, ``outcome1``, ``outcome2``, ``condition``, ``id``), or a list
    of them in ``cases``; with the method, its stage, a calibrator by name and how long to wait."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{
        "scenario": "Priya is deciding how to get to work on Monday morning; her office is 6 km away.",
        "outcome1": "Priya cycles to work.", "outcome2": "Priya takes the bus to work.",
        "condition": "Heavy rain and strong wind are forecast for the whole morning."}]})

    id: str | None = Field(default=None, description=ID_HELP)
    scenario: str | None = None
    outcome1: str | None = None
    outcome2: str | None = None
    condition: str | None = None
    cases: list[CaseIn] | None = Field(default=None, min_length=1, description="Several cases (instead of one inline).")
    method: str = Field(default="anchor", description="anchor, or a baseline: vanilla, cot, ... (GET /v1/methods).")
    stage: str | None = Field(default=None, description="The method's stage, for a method that has several.")
    calibrator: str | None = Field(default=None, description="A calibrator of the service's --calibrators folder, "
                                                            "by name (its file name without .json).")
    wait: float | None = Field(default=None, ge=0, description=WAIT_HELP)


class SpaceRequest(BaseModel):
    """A scenario whose factor space to build (with the service's build settings)."""

    model_config = ConfigDict(extra="forbid")

    scenario: str = Field(default="", description="The situation (may be empty).")
    outcome1: str
    outcome2: str
    wait: float | None = Field(default=None, ge=0, description=WAIT_HELP)
