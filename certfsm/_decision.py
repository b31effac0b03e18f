"""The decision rule and the confidence gate, written down once.

Every module (verification queries, distillation, runtime, hardware) uses
these definitions, so a proof about "token t is chosen" means the same as
the runtime choosing t.

- The network gives one score per output index. Under ``argmax`` the
  chosen index has the largest score, under ``argmin`` (ACAS Xu) the
  smallest. Ties go to the lowest index.
- The gate: the chosen index is emitted only when its score beats every
  other by at least ``margin`` (in the rule's direction); otherwise the
  conservative token is emitted.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np

from ._decimal import decimal_value

# Digits of the natural logarithms that bound a probability gate's margin: an interval about 1e-45 wide.
_LN_DIGITS = 50

DECISION_RULES = ("argmax", "argmin")


def preference(scores: np.ndarray, rule: str) -> np.ndarray:
    """Scores turned so that larger is always better (negated for argmin)."""
    if rule not in DECISION_RULES:
        raise ValueError(f"decision rule {rule!r} is not one of {DECISION_RULES}")
    scores = np.asarray(scores, dtype=np.float64)
    return scores if rule == "argmax" else -scores


def decide(scores: np.ndarray, rule: str) -> np.ndarray | np.intp:
    """The chosen output index for each row of scores (one numpy integer for one row); ties go to the lowest index.

    numpy's argmax/argmin already return the first extremal index, which is
    exactly the tie rule.
    """
    chosen: np.ndarray | np.intp = np.argmax(preference(scores, rule), axis=-1)
    return chosen


def decision_margin(scores: np.ndarray, rule: str) -> np.ndarray | np.float64:
    """How far the chosen index beats the runner-up (0 on a tie; one numpy float for one row); needs >= 2 outputs."""
    ordered = np.sort(preference(scores, rule), axis=-1)
    margin: np.ndarray | np.float64 = ordered[..., -1] - ordered[..., -2]
    return margin


def gated_decide(scores: np.ndarray, rule: str, margin: float, conservative_index: int) -> np.ndarray:
    """The chosen index where it wins by at least `margin`, else `conservative_index`."""
    chosen = decide(scores, rule)
    return np.where(decision_margin(scores, rule) >= margin, chosen, conservative_index)


def margin_from_probability(probability: float, n_tokens: int) -> float:
    """The logit margin m = ln((K-1) p / (1-p)) that guarantees top softmax probability >= p.

    If the top logit beats each of the other K-1 by at least m, the top
    softmax probability is at least 1 / (1 + (K-1) e^-m) = p.
    """
    _require_gate(probability, n_tokens)
    return math.log((n_tokens - 1) * probability / (1.0 - probability))


def _require_gate(probability: float, n_tokens: int) -> None:
    if not 0 < probability < 1:
        raise ValueError(f"probability={probability} must lie strictly between 0 and 1")
    if n_tokens < 2:
        raise ValueError(f"n_tokens={n_tokens} must be at least 2 for a confidence gate")


def margin_bounds(
    margin: float | None = None, probability: float | None = None, n_tokens: int = 2
) -> tuple[Fraction, Fraction] | None:
    """Exact rational (lower, upper) bounds of the gate's logit margin; None: no gate.

    docs/semantics.md, "Confidence gate". A written margin is its decimal, so both bounds are that decimal. A
    probability p gives the irrational ln((K-1) p / (1-p)); the bounds
    enclose it (about 1e-45 apart), and each claim uses the side that is
    sound for it: "no bad token passes the gate" is proved with the lower
    bound (a larger unsafe set), "passes the gate" with the upper one, and
    a witness counts only when it clears the bound on its side.
    """
    if probability is not None:
        _require_gate(probability, n_tokens)
        p = decimal_value(probability)
        return _ln_bounds((n_tokens - 1) * p / (1 - p))
    if margin is not None:
        value = decimal_value(margin)
        return value, value
    return None


def _ln_bounds(q: Fraction) -> tuple[Fraction, Fraction]:
    """Rationals lo <= ln(q) <= hi: ln of numerator and denominator, each correctly rounded by `decimal`.

    `decimal` rounds ln correctly (half-even) at the context precision, so
    each logarithm lies within half a unit in its last place of the result;
    one whole unit on each side is a safe enclosure. ln(1) = 0 exactly.
    """
    if q == 1:
        return Fraction(0), Fraction(0)
    low, high = Fraction(0), Fraction(0)
    with decimal.localcontext() as context:
        context.prec = _LN_DIGITS
        for integer, sign in ((q.numerator, 1), (q.denominator, -1)):
            if integer == 1:
                continue
            value = decimal.Decimal(integer).ln()
            unit = Fraction(10) ** (value.adjusted() - _LN_DIGITS + 1)
            low += sign * Fraction(value) - unit
            high += sign * Fraction(value) + unit
    return low, high
