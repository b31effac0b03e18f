"""Counterexample validation: what counts as a real violation (docs/semantics.md, "Counterexamples").

A point is a counterexample only when, clipped into the float64 points
of the property's exact box, its outputs fall in the unsafe set (strict
rows strictly, no tolerance) three times: in exact rational arithmetic
(the network's weights and the property's constants read exactly: the
semantics every verdict is about), in numpy float64 (`Network.evaluate`)
and in onnxruntime (float32, the model as deployed). A point that only
the floats accept (a strict row met with equality, a miss of 1e-16 that
float64 rounds to a hit) is rejected with that reason. Everything that
reports ``violated`` goes through `validate_counterexample`.

A candidate from a solver or from gradient ascent often sits on the
boundary of the (non-strict) unsafe set, where float32 may miss by a hair
although float64 holds. Such a point is pushed deeper into the unsafe set
by a few small steps of the falsifier's local search (staying in the box)
and checked again; the returned point is always the one that was checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from certfsm import CertfsmError, Network

from ._exact import exact_outputs
from ._falsify import local_search
from ._property import Property

_DEEPEN_SCALES = ((1e-6, 1e-9), (1e-4, 1e-7), (1e-2, 1e-5))
_DEEPEN_STEPS = 12


@dataclass(frozen=True, eq=False)
class Validation:
    """The verdict on one candidate point.

    `x` is the point that was checked (clipped into the box, possibly
    pushed deeper); `outputs` its float64 scores, `outputs_onnxruntime`
    its onnxruntime scores (None when onnxruntime was not reached).
    `reason` says why a candidate was rejected ("" when `ok`).
    """

    ok: bool
    x: np.ndarray
    outputs: np.ndarray
    outputs_onnxruntime: np.ndarray | None
    reason: str = ""


def validate_counterexample(network: Network, prop: Property, x: np.ndarray) -> Validation:
    """Is `x` (clipped into the box) a real violation of `prop`: unsafe exactly, in float64 and in onnxruntime?"""
    point = np.asarray(x, dtype=np.float64).reshape(-1)
    if point.shape != (prop.n_inputs,):
        raise ValueError(f"counterexample has {point.size} values; expected {prop.n_inputs} (one per input)")
    if not np.all(np.isfinite(point)):
        return Validation(False, point, np.full(network.n_outputs, np.nan), None, "counterexample is not finite")
    if np.any(prop.inner_lower > prop.inner_upper):
        index = int(np.argmax(prop.inner_lower > prop.inner_upper))
        return Validation(
            False,
            point,
            network.evaluate(point),
            None,
            f"no float64 value lies in the exact range of input {index}, so no float64 point can be checked",
        )
    point = np.clip(point, prop.inner_lower, prop.inner_upper)
    first = _check(network, prop, point)
    if first.ok or not bool(prop.is_unsafe(first.outputs)):
        return first
    for first_step, last_step in _DEEPEN_SCALES:
        deeper, slack = local_search(network, prop, point[None], _DEEPEN_STEPS, first_step, last_step)
        if slack[0] <= prop.unsafe_slack(first.outputs):
            continue
        again = _check(network, prop, np.clip(deeper[0], prop.inner_lower, prop.inner_upper))
        if again.ok:
            return again
    return first


def _check(network: Network, prop: Property, point: np.ndarray) -> Validation:
    outputs = network.evaluate(point)
    if not bool(prop.is_unsafe(outputs)):
        slack = float(prop.unsafe_slack(outputs))
        miss = f"by {-slack:.3g}" if slack < 0 else "(a strict row holds only with equality)"
        return Validation(False, point, outputs, None, f"float64 outputs miss the unsafe set {miss}")
    from certfsm import run_onnxruntime

    try:
        deployed = np.asarray(run_onnxruntime(network, point), dtype=np.float64).reshape(-1)
    except (CertfsmError, OSError, RuntimeError) as error:
        return Validation(False, point, outputs, None, f"onnxruntime cross-check failed: {error}")
    if not bool(prop.is_unsafe(deployed)):
        deployed_slack = float(prop.unsafe_slack(deployed))
        miss = f"by {-deployed_slack:.2g}" if deployed_slack < 0 else "(a strict row holds only with equality)"
        return Validation(
            False, point, outputs, deployed, f"float32 evaluation (onnxruntime) misses the unsafe set {miss}"
        )
    if not prop.contains_exactly(point):
        return Validation(False, point, outputs, deployed, "the point lies outside the exact input box")
    if not prop.is_unsafe_exactly(exact_outputs(network, point)):
        return Validation(
            False,
            point,
            outputs,
            deployed,
            "the floats accept the point but the exact outputs miss the unsafe set (a rounding "
            "artefact or a strict row met with equality)",
        )
    return Validation(True, point, outputs, deployed)
