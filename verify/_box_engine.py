"""How `auto` decides one box that bound propagation could not close.

A box is closed only by sound bounds or by an exact UNSAT: Z3 over
rationals on the box's own query, with the ReLUs that the box's sound
bounds prove stable fixed to their phase (`phases_of`), which leaves Z3
a case split only on the unstable ones. Marabou answers UNSAT wrongly on
small queries (`_marabou`'s docstring; docs/semantics.md, "Verdicts"),
so its UNSAT never closes a box alone:

- a network of at most `LP_NETWORK` ReLUs and at least `LP_INPUTS`
  inputs (`uses_lp`): ReLU splitting with linear
  programs whose bounds are checked exactly by duality (`_lp`) first,
  with `LP_SHARE` of the time: it follows the network's pieces where a
  thin margin along a surface defeats input splitting and Z3 alike;
- few unstable ReLUs (`Z3_FIRST_UNSTABLE`), or a small network
  (`Z3_FIRST_NETWORK` ReLUs in all): Z3 decides the box directly;
- more: Marabou first, for its speed at finding witnesses (a SAT answer
  is re-validated exactly, in float64 and in onnxruntime, like every
  witness); its UNSAT is only a hint, confirmed by Z3 with the rest of
  the time before the box counts as closed (engine ``marabou+z3``); an
  unconfirmed UNSAT leaves the box open (the caller splits it further);
- without maraboupy, Z3 alone; without z3, nothing here can close a box.

Every answer is a `Result` for the sub-box's property; `stats` records
the unstable count and whether a Marabou UNSAT went unconfirmed.
"""

from __future__ import annotations

import time

import numpy as np

from certfsm import Network

from ._property import Property
from ._result import PROVED, UNKNOWN, VIOLATED, Result

Z3_FIRST_UNSTABLE = 12
Z3_FIRST_NETWORK = 32
"""Small enough that Z3 decides a box of up to `Z3_FIRST_UNSTABLE` unstable ReLUs in a fraction of a second.
The soundness cases (at most 27 ReLUs) and the example (16) are. A 2 x 32 network with float32 weights is not:
on the 7-input random controller of `bench/controllers.py`, boxes with 10 to 12 unstable ReLUs took Z3
5 to 210 s each (the stable ReLUs' float32 rationals grow in the simplex too), while splitting them further
with bounds first decided the same cells in 0.01 to 0.1 s."""
MARABOU_SHARE = 0.5
LP_NETWORK = 256
"""Networks up to this many ReLUs get the LP engine first: each program is solved in floats, and its bound
recomputed in rationals where the floats say it closes (cersyve's 68 ReLUs: about 9 ms a program on one core)."""
LP_SHARE = 0.5
LP_INPUTS = 3


def phases_of(hidden: np.ndarray) -> np.ndarray:
    """Per hidden neuron: +1 proved active (lower bound >= 0), -1 proved inactive (upper <= 0), 0 unknown.

    `hidden` is one box's packed bounds (2, N_hidden), sound over the box.
    """
    low, high = hidden[0], hidden[1]
    return np.where(low >= 0.0, 1, np.where(high <= 0.0, -1, 0)).astype(np.int8)


def uses_lp(network: Network) -> bool:
    """True when boxes of this network go to the LP engine first.

    More than `Z3_FIRST_NETWORK` ReLUs (below that Z3 decides boxes in a
    fraction of a second, and its proofs carry a certificate, which the LP
    engine's do not yet), at most `LP_NETWORK`, at least `LP_INPUTS` inputs
    (with one or two, input splitting closes a thin margin along a curve
    quickly: the TLL controllers of ../shared/benchmarks/rl took 20 times
    longer through the LP engine), and scipy importable.
    """
    import importlib.util

    return (
        Z3_FIRST_NETWORK < sum(network.hidden_sizes) <= LP_NETWORK
        and network.n_inputs >= LP_INPUTS
        and importlib.util.find_spec("scipy") is not None
    )


def available() -> tuple[bool, bool]:
    """(z3 importable, maraboupy importable)."""
    from . import _marabou, _z3

    return _z3.is_available(), _marabou.is_available()


def decide_box(
    network: Network, prop: Property, hidden: np.ndarray | None, seconds: float, rlimit: int | None = None
) -> Result:
    """Decide `prop` (one sub-box) within `seconds`: proved only by Z3, violated only with a validated witness.

    With `rlimit` (a `WorkBudget`'s Z3 resource count) Z3 alone decides,
    so the answer does not depend on the machine's speed: Marabou's
    answers depend on its time limit, and its UNSAT would need Z3 anyway.
    """
    from . import _marabou, _z3

    started = time.monotonic()
    has_z3, has_marabou = available()
    phases = phases_of(hidden) if hidden is not None and hidden.size else None
    unstable = int(np.count_nonzero(phases == 0)) if phases is not None else sum(network.hidden_sizes)
    stats = {"unstable": unstable}
    if not has_z3 and not has_marabou:
        return Result(UNKNOWN, "none", 0.0, reason="neither z3 nor maraboupy can be imported", stats=stats)
    if uses_lp(network):
        from . import _lp

        answer = _lp.check_box(network, prop, seconds * LP_SHARE)
        if answer.verdict != UNKNOWN:
            return _with_stats(answer, "lp", stats)
        seconds -= time.monotonic() - started
    is_small = sum(network.hidden_sizes) <= Z3_FIRST_NETWORK
    if has_z3 and (unstable <= Z3_FIRST_UNSTABLE or is_small or not has_marabou or rlimit is not None):
        return _with_stats(_z3.check(network, prop, seconds, phases, rlimit), "z3", stats)
    hint = _marabou.check(network, prop, seconds * (MARABOU_SHARE if has_z3 else 1.0))
    if hint.verdict != PROVED:
        return _with_stats(hint, "marabou", stats)
    stats["marabou_unsat"] = True
    remaining = seconds - (time.monotonic() - started)
    if not has_z3 or remaining <= 0.1:
        return Result(
            UNKNOWN,
            "marabou",
            time.monotonic() - started,
            stats=stats,
            reason="Marabou answered UNSAT, which alone does not close a box, and z3 could not confirm it "
            "(" + ("z3 is not installed" if not has_z3 else "no time left") + ")",
        )
    confirmation = _z3.check(network, prop, remaining, phases)
    if confirmation.verdict == PROVED:
        return _with_stats(confirmation, "marabou+z3", stats)
    if confirmation.verdict == VIOLATED:
        stats["marabou_wrong_unsat"] = True
        return _with_stats(confirmation, "z3", stats)
    return Result(
        UNKNOWN,
        "marabou",
        time.monotonic() - started,
        stats=stats,
        reason=f"Marabou answered UNSAT but z3 did not confirm it ({confirmation.reason})",
    )


def _with_stats(result: Result, engine: str, stats: dict) -> Result:
    return Result(
        result.verdict,
        engine,
        result.seconds,
        result.reason,
        result.counterexample,
        result.outputs,
        {**result.stats, **stats},
    )
