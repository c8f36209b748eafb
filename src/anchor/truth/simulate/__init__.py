"""The simulated LLM: answers every prompt anchor sends from a world's truth, with stated errors.

* :mod:`.errors`: :class:`SimErrors` (each kind of error, its default and meaning), the
  :class:`Miscalibration` curve, and the seeded random sources;
* :mod:`.recognise`: which prompt a request is (a table built from ``anchor.prompts``) and its fields;
* :mod:`.knowledge`: what the LLM knows of one world, and the true numbers it answers from;
* :mod:`.stages`, :mod:`.baselines`, :mod:`.bird`: the answers, prompt by prompt;
* :mod:`.llm`: :class:`SimulatedLLM` (request -> answer) and :class:`SimulatedBackend` (in process);
* :mod:`.server`: the same answers over an OpenAI-compatible HTTP server (``anchor truth serve``).
"""

from __future__ import annotations

from anchor.truth.simulate.errors import Miscalibration, SimErrors
from anchor.truth.simulate.llm import SimulatedBackend, SimulatedLLM
from anchor.truth.simulate.recognise import Unrecognised

__all__ = ["Miscalibration", "SimErrors", "SimulatedBackend", "SimulatedLLM", "Unrecognised"]
