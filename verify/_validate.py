"""Counterexample validation: what DESIGN calls a real violation.

A point is a counterexample only when, clipped into the property's box,
its outputs fall in the unsafe set both in numpy float64
(`Network.evaluate`, the IR that was verified) and in onnxruntime (float32,
the model as deployed), with no tolerance. Everything that reports
``violated`` goes through `validate_counterexample`.

A candidate from a solver or from gradient ascent often sits on the
boundary of the (non-strict) unsafe set, where float32 may miss by a hair
although float64 holds. Such a point is pushed deeper into the unsafe set
by a few small steps of the falsifier's local search (staying in the box)
and checked again; the returned point is always the one that was checked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from certfsm._errors import CertfsmError
from certfsm._network import Network

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
    """Is `x` (clipped into the box) a real violation of `prop`: unsafe in float64 and in onnxruntime?"""
    point = np.asarray(x, dtype=np.float64).reshape(-1)
    if point.shape != (prop.n_inputs,):
        raise ValueError(f"counterexample has {point.size} values; expected {prop.n_inputs} (one per input)")
    if not np.all(np.isfinite(point)):
        return Validation(False, point, np.full(network.n_outputs, np.nan), None, "counterexample is not finite")
    point = np.clip(point, prop.lower, prop.upper)
    first = _check(network, prop, point)
    if first.ok or not _holds_in_float64(prop, first):
        return first
    for first_step, last_step in _DEEPEN_SCALES:
        deeper, slack = local_search(network, prop, point[None], _DEEPEN_STEPS, first_step, last_step)
        if slack[0] <= prop.unsafe_slack(first.outputs):
            continue
        again = _check(network, prop, deeper[0])
        if again.ok:
            return again
    return first


def _holds_in_float64(prop: Property, validation: Validation) -> bool:
    return bool(prop.unsafe_slack(validation.outputs) >= 0.0)


def _check(network: Network, prop: Property, point: np.ndarray) -> Validation:
    outputs = network.evaluate(point)
    slack = float(prop.unsafe_slack(outputs))
    if not slack >= 0.0:
        return Validation(False, point, outputs, None, f"float64 outputs miss the unsafe set by {-slack:.3g}")
    from certfsm._onnx import run_onnxruntime

    try:
        deployed = np.asarray(run_onnxruntime(network, point), dtype=np.float64).reshape(-1)
    except (CertfsmError, OSError, RuntimeError) as error:
        return Validation(False, point, outputs, None, f"onnxruntime cross-check failed: {error}")
    deployed_slack = float(prop.unsafe_slack(deployed))
    if not deployed_slack >= 0.0:
        return Validation(
            False,
            point,
            outputs,
            deployed,
            f"float32 evaluation (onnxruntime) misses the unsafe set by {-deployed_slack:.2g}",
        )
    return Validation(True, point, outputs, deployed)
