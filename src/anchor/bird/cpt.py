"""BIRD's conditional probability table: sampled assignments, verbal judgements, and the fit.

The outcome model has one parameter p_v per value v:

    P(O1 | f) = prod_v p_v / (prod_v p_v + prod_v (1 - p_v))    over the values v active in f

and is fitted by minibatch SGD on MSE(P(O1|f), y) + margin_weight * mean_v hinge(v), where the
hinge keeps m_v, the mean output over the assignments containing v, on the side of 0.5 its label
says (no loss for neutral values). The module is shared by BIRD proper (one value per factor) and
the BIRD-on-ANCHOR transplant (any subset of presence variables): both describe an assignment as
a boolean row saying which parameters are active.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from anchor import prompts
from anchor.bird.types import BirdConfig
from anchor.bird.verbal import VerbalLevel, VerbalParseError, parse_level, reconcile
from anchor.errors import LLMOutputError
from anchor.extras import MissingExtra, require_extra
from anchor.llm import chain
from anchor.llm.client import LLMClient
from anchor.progress import ProgressEvent, Reporter, silent
from anchor.types import FactorLabel, Scenario

# --------------------------------------------------------------------------- assignments


def product_size(sizes: Sequence[int]) -> int:
    """Number of complete assignments (one value per factor); 0 without factors."""
    return math.prod(sizes) if sizes else 0


def decode_assignment(index: int, sizes: Sequence[int]) -> tuple[int, ...]:
    """The ``index``-th assignment in ``itertools.product`` order (last factor varies fastest)."""
    out = []
    for size in reversed(sizes):
        index, digit = divmod(index, size)
        out.append(digit)
    return tuple(reversed(out))


def sample_assignments(sizes: Sequence[int], n: int, rng: random.Random) -> tuple[list[tuple[int, ...]], bool]:
    """``n`` complete assignments and whether the product was cycled.

    A product with at most ``n`` members is listed in full and repeated until ``n`` (the first
    ``n mod N`` assignments get one extra copy); a larger one gives ``n`` distinct assignments drawn
    uniformly without replacement.
    """
    total = product_size(sizes)
    if total == 0 or n <= 0:
        return [], False
    if total <= n:
        full = list(itertools.product(*(range(s) for s in sizes)))
        return [full[i % total] for i in range(n)], total < n
    return [decode_assignment(i, sizes) for i in rng.sample(range(total), n)], False


def one_hot_rows(assignments: Sequence[Sequence[int]], sizes: Sequence[int]) -> np.ndarray:
    """Boolean rows (one per assignment) over the flattened values."""
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    rows = np.zeros((len(assignments), int(sum(sizes))), dtype=bool)
    for r, a in enumerate(assignments):
        rows[r, offsets + np.asarray(a, dtype=int)] = True
    return rows


def margin_rows(sizes: Sequence[int], cap: int, rng: random.Random) -> tuple[np.ndarray, bool]:
    """The assignments the margin term averages over: the whole product, or a seeded uniform sample
    of ``cap`` distinct ones when the product is larger (then the flag is True)."""
    total = product_size(sizes)
    if total <= cap:
        return one_hot_rows(list(itertools.product(*(range(s) for s in sizes))), sizes), False
    return one_hot_rows([decode_assignment(i, sizes) for i in rng.sample(range(total), cap)], sizes), True


def sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def condition_text(statements: Sequence[str]) -> str:
    """Values of an assignment as one condition: each ends with a period, joined by spaces."""
    return " ".join(sentence(s) for s in statements)


# --------------------------------------------------------------------------- judgements


@dataclass
class Judgement:
    """The LLM's verbal judgement of one assignment, parsed and reconciled."""

    reasoning: str = ""
    raw_outcome1: str | None = None
    raw_outcome2: str | None = None
    level1: VerbalLevel | None = None
    level2: VerbalLevel | None = None
    reconciled1: VerbalLevel | None = None
    reconciled2: VerbalLevel | None = None
    target: float | None = None
    note: str | None = None
    out_of_scale: bool = False


async def judge(client: LLMClient, scenario: Scenario, statements: Sequence[str], config: BirdConfig,
                *, sample_index: int) -> Judgement:
    """Ask for the two verbal judgements of one assignment and turn them into a target.

    Never raises for a bad answer: an unusable one comes back with ``target=None`` and a note.
    """
    try:
        answer = await client.ask(
            prompts.BIRD_CPT_DATA, sample_index=sample_index, temperature=config.temperatures.cpt_data,
            scenario=scenario.text or "(none)", condition=condition_text(statements),
            outcome1=scenario.outcome1, outcome2=scenario.outcome2)
    except LLMOutputError as exc:
        return Judgement(note=f"no valid judgement: {exc.reason}")
    j = Judgement(reasoning=answer.reasoning, raw_outcome1=answer.outcome1, raw_outcome2=answer.outcome2)
    try:
        j.level1 = parse_level(answer.outcome1, case_sensitive=config.case_sensitive_labels)
        j.level2 = parse_level(answer.outcome2, case_sensitive=config.case_sensitive_labels)
    except VerbalParseError as exc:
        j.note, j.out_of_scale = f"dropped: {exc}", True
        return j
    rec = reconcile(j.level1, j.level2, config.reconciliation)
    j.reconciled1, j.reconciled2, j.target = rec.outcome1, rec.outcome2, rec.target
    return j


async def judge_all(client: LLMClient, scenario: Scenario, assignments: Sequence[Sequence[str]],
                    config: BirdConfig, report: Reporter = silent) -> list[Judgement]:
    """Judge every assignment; repeats of one assignment are independent samples."""
    indices = copy_indices(assignments)
    done = 0

    async def one(statements: Sequence[str], copy_index: int) -> Judgement:
        nonlocal done
        j = await judge(client, scenario, statements, config, sample_index=copy_index)
        done += 1
        report(ProgressEvent("bird.cpt_data", done, len(assignments)))
        return j

    return list(await chain.gather(*(one(a, i) for a, i in zip(assignments, indices, strict=True))))


def copy_indices(assignments: Sequence[Sequence[object]]) -> list[int]:
    """For each assignment, how many identical ones came before it."""
    seen: dict[tuple[object, ...], int] = {}
    out = []
    for a in assignments:
        k = tuple(a)
        out.append(seen.get(k, 0))
        seen[k] = out[-1] + 1
    return out


def class_balance_note(targets: Sequence[float]) -> str | None:
    """A note when the usable targets all lean one way (or none leans either way)."""
    if not targets:
        return None
    o1 = sum(1 for t in targets if t > 0.5)
    o2 = sum(1 for t in targets if t < 0.5)
    if o1 and o2:
        return None
    n = len(targets)
    if not o1 and not o2:
        return (f"one-class training set: all {n} usable judgements are neutral (0.5); the fit only moves the "
                "parameters through the margin term, so estimates mostly reflect the value labels")
    side, count = ("outcome 1", o1) if o1 else ("outcome 2", o2)
    return (f"one-class training set: every usable judgement that leans favours {side} ({count} of {n}, the rest "
            f"neutral); the CPT cannot learn what favours the other outcome beyond the value labels")


# --------------------------------------------------------------------------- the fit


@dataclass
class FitResult:
    params: np.ndarray
    loss_per_epoch: list[float] = field(default_factory=list)
    steps: int = 0
    notes: list[str] = field(default_factory=list)


def label_sign(label: FactorLabel) -> int:
    """Margin direction: +1 keeps m_v above 0.5, -1 below, 0 no margin."""
    return {FactorLabel.OUTCOME1: 1, FactorLabel.OUTCOME2: -1, FactorLabel.NEUTRAL: 0}[label]


def cpt_output(rows: np.ndarray, params: np.ndarray) -> np.ndarray:
    """P(O1 | f) for boolean ``rows`` over the parameters (NumPy, float64)."""
    rows = np.asarray(rows, dtype=bool)
    p = np.asarray(params, dtype=np.float64)
    num = np.where(rows, p, 1.0).prod(axis=1)
    den = num + np.where(rows, 1.0 - p, 1.0).prod(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return num / den


def fit_cpt(
    train_rows: np.ndarray,
    targets: np.ndarray,
    init: np.ndarray,
    margin: np.ndarray,
    signs: np.ndarray,
    *,
    epochs: int,
    lr: float,
    batch_size: int,
    margin_weight: float,
    constrained: bool,
    eps: float,
    seed: int,
) -> FitResult:
    """Fit the parameters by minibatch SGD (no momentum), deterministic for a given ``seed``.

    ``train_rows`` (n x P) and ``margin`` (M x P) are boolean activity rows; ``signs`` (P) gives
    each parameter's margin direction. Constrained training projects the parameters into
    [eps, 1 - eps] after every step; unconstrained training (the reference code) leaves them free.
    """
    try:
        import torch  # deferred: importing torch costs more than everything else in this module
    except ImportError as exc:  # the optional 'bird' extra
        require_extra("bird")  # not installed: the usual line
        raise MissingExtra(f"BIRD's CPT fit cannot import torch ({exc}); reinstall it: "
                           "pip install --force-reinstall 'anchor-infer[bird]'") from None

    x = torch.as_tensor(np.asarray(train_rows, dtype=bool))
    y = torch.as_tensor(np.asarray(targets, dtype=np.float64))
    m_rows = torch.as_tensor(np.asarray(margin, dtype=bool))
    sign = torch.as_tensor(np.asarray(signs, dtype=np.float64))
    counts = m_rows.sum(dim=0).to(torch.float64)
    has_margin = counts > 0
    n_margin = int(has_margin.sum())
    p = torch.tensor(np.asarray(init, dtype=np.float64), requires_grad=True)
    optimiser = torch.optim.SGD([p], lr=lr, momentum=0.0)
    generator = torch.Generator().manual_seed(seed)
    result = FitResult(params=np.asarray(init, dtype=np.float64).copy())
    n = int(x.shape[0])
    if n == 0:
        return result

    x_float = x.to(torch.float64)
    m_float = m_rows.to(torch.float64)

    def output(rows: torch.Tensor, rows_float: torch.Tensor) -> torch.Tensor:
        if constrained:
            # Inside (0, 1) the ratio of products is a sigmoid of summed log-odds: one matrix product,
            # which keeps the margin term cheap on products of tens of thousands of assignments.
            return torch.sigmoid(rows_float @ torch.logit(p))
        num = torch.where(rows, p, torch.ones_like(p)).prod(dim=1)
        return num / (num + torch.where(rows, 1.0 - p, torch.ones_like(p)).prod(dim=1))

    for _ in range(epochs):
        order = torch.randperm(n, generator=generator)
        epoch_loss = 0.0
        for start in range(0, n, batch_size):
            batch = order[start:start + batch_size]
            loss = torch.mean((output(x[batch], x_float[batch]) - y[batch]) ** 2)
            if margin_weight > 0 and n_margin and m_rows.shape[0]:
                out = output(m_rows, m_float)
                mean_v = (out @ m_float) / counts.clamp(min=1.0)
                hinge = torch.clamp(-sign * (mean_v - 0.5), min=0.0)
                loss = loss + margin_weight * hinge[has_margin].mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            if constrained:
                with torch.no_grad():
                    p.clamp_(eps, 1.0 - eps)
            result.steps += 1
            epoch_loss += float(loss.detach()) * len(batch)
        result.loss_per_epoch.append(epoch_loss / n)
    result.params = p.detach().numpy().copy()
    if not np.all(np.isfinite(result.params)):
        result.notes.append("training diverged: some parameters are not finite numbers")
    elif not constrained and np.any((result.params <= 0) | (result.params >= 1)):
        outside = int(np.sum((result.params <= 0) | (result.params >= 1)))
        result.notes.append(f"unconstrained training left {outside} parameter(s) outside (0, 1), as the reference "
                            "code allows; outputs may leave [0, 1]")
    return result
