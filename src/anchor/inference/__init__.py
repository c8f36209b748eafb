"""Stage 3 of ANCHOR: turning elicited factor and latent parameters into outcome probabilities.

* :mod:`.config`: ``InferenceConfig``, the stage's settings;
* :mod:`.engine`: ``InferenceEngine``, the stage end to end, with :mod:`.elicit` (phi, the latent
  grouping and parameters, asked of the LLM or counted from labels);
* :mod:`.bayes`: Naive Bayes, the latent CBN, the linear opinion pool and BMA, with
  :mod:`.numeric` (log-space helpers and checks) and :mod:`.cbn_reference` (slow reference
  computations of the CBN, for tests).

The public names below are importable from ``anchor.inference``. Only the settings load with the
package; the rest loads on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anchor.lazy import lazy_exports
from anchor.settings.inference import InferenceConfig

_LAZY = {
    "InferenceEngine": "anchor.inference.engine",
    "bayesian_model_average": "anchor.inference.bayes",
    "cbn_posterior": "anchor.inference.bayes",
    "linear_opinion_pool": "anchor.inference.bayes",
    "naive_bayes_posterior": "anchor.inference.bayes",
}

if TYPE_CHECKING:
    from anchor.inference.bayes import (
        bayesian_model_average,
        cbn_posterior,
        linear_opinion_pool,
        naive_bayes_posterior,
    )
    from anchor.inference.engine import InferenceEngine


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "InferenceConfig", "InferenceEngine", "bayesian_model_average", "cbn_posterior", "linear_opinion_pool",
    "naive_bayes_posterior",
]
