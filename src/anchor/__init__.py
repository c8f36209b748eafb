"""anchor: calibrated, auditable probabilities for two competing outcomes from LLM judgments.

An implementation of ANCHOR (abductive factor spaces, hierarchical mapping, Naive Bayes plus a
latent causal Bayesian network). See README.md for the command line; the Python API starts at
``anchor.Anchor``.
"""

__version__ = "0.1.0"
