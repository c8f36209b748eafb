"""Reference posteriors for the latent network, slow but direct: a brute-force sum over every
latent state, and pgmpy's variable elimination on the explicit network. For tests and benchmarks
that check the closed form in ``anchor.inference.bayes``; not for production use.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from anchor.inference.numeric import check_cbn, logaddexp, logsumexp, posterior_from_log_likelihoods

# 2**20 joint states is about a million rows: the most the brute-force reference should attempt.
_MAX_ENUMERATION_LATENTS = 20
# States evaluated per block by the brute-force reference, to bound its memory use.
_ENUMERATION_BLOCK = 1 << 14


def _cbn_log_likelihoods_enumeration(
    phis: list[float], assignment: list[int], params: list[tuple[float, float]]
) -> tuple[float, float]:
    """Brute-force log-likelihoods: log-sum-exp of the joint over all 2**k latent states."""
    k = len(params)
    if k > _MAX_ENUMERATION_LATENTS:
        raise ValueError(f"enumeration over {k} latents (2**{k} states) is refused; the limit is 20")
    phi_arr = np.asarray(phis, dtype=np.float64)
    assign_arr = np.asarray(assignment, dtype=np.intp)
    log_on = np.log(phi_arr)  # log P(f=1 | L=1)
    log_off = np.log1p(-phi_arr)  # log P(f=1 | L=0)
    a = np.asarray(params, dtype=np.float64).reshape(k, 2)
    with np.errstate(divide="ignore"):  # latent parameters of exactly 0 or 1 are legal: log -> -inf
        log_a = np.log(a)
        log_not_a = np.log1p(-a)
    bits = np.arange(k)
    totals = [-math.inf, -math.inf]
    n_states = 1 << k
    for start in range(0, n_states, _ENUMERATION_BLOCK):
        idx = np.arange(start, min(start + _ENUMERATION_BLOCK, n_states))
        states = ((idx[:, None] >> bits) & 1).astype(bool)  # one row per joint latent state
        log_factors = np.where(states[:, assign_arr], log_on, log_off).sum(axis=1)
        for r in (0, 1):
            log_latents = np.where(states, log_a[:, r], log_not_a[:, r]).sum(axis=1)
            totals[r] = logaddexp(totals[r], logsumexp(log_latents + log_factors))
    return totals[0], totals[1]


def cbn_posterior_enumeration(
    phis: Sequence[float],
    assignment: Sequence[int],
    latent_params: Sequence[tuple[float, float]],
) -> float:
    """Reference P(O1 | E) that sums the joint over every latent state explicitly.

    Exponential in the number of latents (refuses more than 20); meant for tests and benchmarks,
    not for production use. Works in log space like the closed form.
    """
    phi_list, assign, params = check_cbn(phis, assignment, latent_params)
    log_l1, log_l2 = _cbn_log_likelihoods_enumeration(phi_list, assign, params)
    return posterior_from_log_likelihoods(log_l1, log_l2)


def cbn_posterior_pgmpy(
    phis: Sequence[float],
    assignment: Sequence[int],
    latent_params: Sequence[tuple[float, float]],
) -> float:
    """Reference P(O1 | E) from pgmpy's variable elimination on the explicit network.

    Builds Outcome -> L_i -> F_j with a uniform outcome prior and queries the outcome with every
    passed factor observed as 1. pgmpy is a development dependency, so it is imported here only.
    pgmpy multiplies plain probabilities, so very long or extreme evidence lists can underflow
    there even though the closed form copes.
    """
    phi_list, assign, params = check_cbn(phis, assignment, latent_params)
    with warnings.catch_warnings():
        # pgmpy 1.x warns about its own deprecated modules on import; that is not our concern.
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        import pgmpy.models as pgm_models
        from pgmpy.factors.discrete import TabularCPD
        from pgmpy.inference import VariableElimination

    # pgmpy >= 1.0 names the class DiscreteBayesianNetwork and keeps a BayesianNetwork stub that
    # raises on construction; older releases only have BayesianNetwork.
    network_cls = getattr(pgm_models, "DiscreteBayesianNetwork", None) or pgm_models.BayesianNetwork

    outcome = "Outcome"
    latents = [f"L{i}" for i in range(len(params))]
    factors = [f"F{j}" for j in range(len(phi_list))]
    model = network_cls()
    model.add_node(outcome)
    model.add_nodes_from(latents)
    model.add_nodes_from(factors)
    model.add_edges_from([(outcome, name) for name in latents])
    model.add_edges_from([(latents[i], factors[j]) for j, i in enumerate(assign)])

    cpds = [TabularCPD(outcome, 2, [[0.5], [0.5]], state_names={outcome: ["O1", "O2"]})]
    for name, (a1, a2) in zip(latents, params, strict=True):
        # Rows are the latent's states (0, 1); columns follow the outcome's states (O1, O2).
        cpds.append(
            TabularCPD(
                name,
                2,
                [[1.0 - a1, 1.0 - a2], [a1, a2]],
                evidence=[outcome],
                evidence_card=[2],
                state_names={name: [0, 1], outcome: ["O1", "O2"]},
            )
        )
    for name, i, phi in zip(factors, assign, phi_list, strict=True):
        # Columns follow the parent latent's states (0, 1): P(f=1 | L=1) = phi, P(f=1 | L=0) = 1 - phi.
        cpds.append(
            TabularCPD(
                name,
                2,
                [[phi, 1.0 - phi], [1.0 - phi, phi]],
                evidence=[latents[i]],
                evidence_card=[2],
                state_names={name: [0, 1], latents[i]: [0, 1]},
            )
        )
    model.add_cpds(*cpds)
    model.check_model()

    result = VariableElimination(model).query(
        variables=[outcome], evidence={name: 1 for name in factors}, show_progress=False
    )
    return float(result.get_value(**{outcome: "O1"}))
