"""The methods a run drives (``anchor eval``, ``anchor predict``, ``reproduce``), one family per module, with their
contract and registry.

* :mod:`.contract`: the shape every method fills (``Method``, ``PairJudge``, ``Estimate``), what the
  runner hands it (``MethodContext``) and how it is described (``MethodSpec``);
* :mod:`.artefacts`: per-scenario artefacts (factor spaces, BIRD models) stored in the run directory;
* :mod:`.registry`: ``METHODS``, every family's specs by name, and ``build_method``;
* the families: :mod:`.anchor_method` (ANCHOR), :mod:`.baselines` (the direct-LLM baselines and
  Compare) and :mod:`.bird` (BIRD's three methods: :mod:`.bird_eval`, strict and relaxed, and
  :mod:`.bird_on_anchor`, BIRD's CPT on ANCHOR's factor space).

The package's public names are below; the artefact stores the methods keep their spaces and models
in are :mod:`anchor.artefacts`'s. Nothing here imports a method's heavy dependencies (the pipeline,
BIRD): the CLI imports this to list the methods.
"""

from anchor.methods.anchor_method import AnchorMethod
from anchor.methods.baselines import BaselineMethod, CompareMethod
from anchor.methods.contract import Estimate, Method, MethodContext, MethodSpec, PairJudge, Status
from anchor.methods.registry import (
    DIRECT_METHODS,
    METHODS,
    ORACLE_METHODS,
    PAIRWISE_ONLY_METHODS,
    STAGED_METHODS,
    FallbackMethod,
    build_method,
    register,
)

__all__ = [
    "DIRECT_METHODS",
    "METHODS",
    "ORACLE_METHODS",
    "PAIRWISE_ONLY_METHODS",
    "STAGED_METHODS",
    "AnchorMethod",
    "BaselineMethod",
    "CompareMethod",
    "Estimate",
    "FallbackMethod",
    "Method",
    "MethodContext",
    "MethodSpec",
    "PairJudge",
    "Status",
    "build_method",
    "register",
]
