"""The simulated LLM's answers to BIRD's prompts (``anchor.prompts.bird``): not written yet; a BIRD
request is refused as a prompt the simulator does not answer."""

from __future__ import annotations

from anchor.truth.simulate.core import Handler

HANDLERS: dict[str, Handler] = {}
