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

import math

import numpy as np

DECISION_RULES = ("argmax", "argmin")


def preference(scores: np.ndarray, rule: str) -> np.ndarray:
    """Scores turned so that larger is always better (negated for argmin)."""
    if rule not in DECISION_RULES:
        raise ValueError(f"decision rule {rule!r} is not one of {DECISION_RULES}")
    scores = np.asarray(scores, dtype=np.float64)
    return scores if rule == "argmax" else -scores


def decide(scores: np.ndarray, rule: str) -> np.ndarray:
    """The chosen output index for each row of scores; ties go to the lowest index.

    numpy's argmax/argmin already return the first extremal index, which is
    exactly the tie rule.
    """
    return np.argmax(preference(scores, rule), axis=-1)


def decision_margin(scores: np.ndarray, rule: str) -> np.ndarray:
    """How far the chosen index beats the runner-up (0 on a tie); needs >= 2 outputs."""
    ordered = np.sort(preference(scores, rule), axis=-1)
    return ordered[..., -1] - ordered[..., -2]


def gated_decide(scores: np.ndarray, rule: str, margin: float, conservative_index: int) -> np.ndarray:
    """The chosen index where it wins by at least `margin`, else `conservative_index`."""
    chosen = decide(scores, rule)
    return np.where(decision_margin(scores, rule) >= margin, chosen, conservative_index)


def margin_from_probability(probability: float, n_tokens: int) -> float:
    """The logit margin m = ln((K-1) p / (1-p)) that guarantees top softmax probability >= p.

    If the top logit beats each of the other K-1 by at least m, the top
    softmax probability is at least 1 / (1 + (K-1) e^-m) = p.
    """
    if not 0.0 < probability < 1.0:
        raise ValueError(f"probability={probability} must lie strictly between 0 and 1")
    if n_tokens < 2:
        raise ValueError(f"n_tokens={n_tokens} must be at least 2 for a confidence gate")
    return math.log((n_tokens - 1) * probability / (1.0 - probability))
