"""The LP engine (ReLU splitting, bounds checked exactly by duality): never a wrong answer, and it closes thin margins.

Why: its bounds come from floating-point HiGHS duals, so what makes them
sound is the exact weak-duality sum alone; these tests hold that sum to
the solver's optimum, feed it arbitrary duals, and set the engine against
Z3 and dense sampling on random chains and graphs.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from graph_networks import random_graph

from certfsm import AffineLayer, Network
from certfsm.verify import Conjunction, Property, check
from certfsm.verify import _lp, _z3
from certfsm.verify._bounds import pack, preactivation_bounds

pytest.importorskip("scipy")


def _problem(seed: int, graph: bool) -> tuple[Network, Property]:
    rng = np.random.default_rng(seed)
    if graph:
        network = random_graph(rng, 3, [6, 5], 2, grid=0.125)
    else:
        layers = []
        for n_in, n_out in ((3, 6), (6, 5), (5, 2)):
            weight = np.round(rng.normal(0, 1, (n_out, n_in)) * 8) / 8
            layers.append(AffineLayer(weight.astype(np.float32), np.round(rng.normal(0, 0.3, n_out) * 8) / 8, "l"))
        network = Network(tuple(layers))
    lower = -np.ones(3) * rng.uniform(0.5, 1.5)
    samples = rng.uniform(lower, -lower, (20000, 3))
    top = float(np.max(network.evaluate(samples) @ np.array([1.0, -1.0])))
    threshold = top + float(rng.choice([-0.05, 0.02, 0.3]))
    unsafe = Conjunction(np.array([[-1.0, 1.0]]), np.array([-threshold]))  # y0 - y1 >= threshold
    return network, Property("lp", lower, -lower, (unsafe,))


def _root_program(network: Network, prop: Property):
    known = pack(preactivation_bounds(network, prop.lower[None], prop.upper[None]), 1)
    low, high = known[0, 0], known[0, 1]
    return _lp._program(network, (prop.exact_lower, prop.exact_upper), low, high, {}, prop.unsafe[0])


@pytest.mark.parametrize("seed", range(6))
def test_the_exact_bound_never_exceeds_the_program_optimum_whatever_the_duals(seed):
    network, prop = _problem(seed, graph=seed % 2 == 1)
    rows, bounds, t = _root_program(network, prop)
    status, solution, upper, equal = _lp._solve(rows, bounds, t)
    assert status == 0
    optimum = Fraction(float(solution[t]))
    exact = _lp._exact_bound(rows, bounds, t, upper, equal)
    assert exact <= optimum + Fraction(1, 10**9)
    assert float(exact) >= float(optimum) - 1e-6  # the solver's duals are (nearly) optimal
    rng = np.random.default_rng(seed)
    for _ in range(5):  # any duals give a bound, never above the optimum
        noisy = _lp._exact_bound(rows, bounds, t, upper + rng.normal(0, 0.5, upper.shape), equal * rng.uniform(0, 2))
        assert noisy <= optimum + Fraction(1, 10**9)


def test_a_region_the_splits_make_empty_is_shown_empty_exactly():
    # z0 = x - 1 and z1 = -x - 1 on x in [-2, 2]: both active needs x >= 1 and x <= -1
    network = Network(
        (
            AffineLayer(np.array([[1.0], [-1.0]]), np.array([-1.0, -1.0]), "two ramps"),
            AffineLayer(np.array([[1.0, 1.0]]), np.zeros(1), "sum"),
        )
    )
    prop = Property("empty", np.array([-2.0]), np.array([2.0]), (Conjunction(np.array([[1.0]]), np.array([10.0])),))
    known = pack(preactivation_bounds(network, prop.lower[None], prop.upper[None]), 1)
    both = {0: 1, 1: 1}
    rows, bounds, t = _lp._program(
        network, (prop.exact_lower, prop.exact_upper), known[0, 0], known[0, 1], both, prop.unsafe[0]
    )
    assert _lp._solve(rows, bounds, t)[0] == 2  # HiGHS: infeasible
    assert _lp._proved_empty(rows, bounds)
    one = {0: 1}
    rows, bounds, t = _lp._program(
        network, (prop.exact_lower, prop.exact_upper), known[0, 0], known[0, 1], one, prop.unsafe[0]
    )
    assert not _lp._proved_empty(rows, bounds)


@pytest.mark.parametrize("seed", range(12))
def test_the_lp_engine_never_contradicts_z3_or_sampling(seed):
    network, prop = _problem(seed, graph=seed % 2 == 0)
    result = _lp.check_box(network, prop, 60.0)
    exact = _z3.check(network, prop, 60.0)
    assert {result.verdict, exact.verdict} != {"proved", "violated"}, (result.reason, exact.reason)
    samples = np.random.default_rng(seed + 100).uniform(prop.lower, prop.upper, (20000, 3))
    if np.any(prop.unsafe_slack(network.evaluate(samples)) >= 0.0):
        assert result.verdict != "proved"
    assert result.verdict != "unknown" or "ReLU" in result.reason


CERSYVE = Path(__file__).resolve().parents[3] / "shared" / "benchmarks" / "cersyve"


@pytest.mark.slow
def test_a_thin_barrier_margin_is_closed_by_the_lp_engine_and_left_without_a_certificate():
    """cersyve's lane_keep_finetune_con: input splitting alone times out; the LP engine proves it (published unsat),
    and the certificate writer says why it cannot write this proof down yet instead of writing a wrong one."""
    from certfsm import load_onnx
    from certfsm.verify import parse_vnnlib
    from certfsm.verify._certificate import NoCertificate, proof_documents

    if not (CERSYVE / "instances.csv").exists():
        pytest.skip(f"{CERSYVE} is not here")
    network = load_onnx(CERSYVE / "onnx" / "lane_keep_finetune_con.onnx")
    (prop,) = parse_vnnlib(CERSYVE / "vnnlib" / "prop_lane_keep.vnnlib", n_inputs=4)
    result = check(network, prop, timeout=90, jobs=2)
    assert result.verdict == "proved", result.reason
    assert result.stats["closed_by_engine"] >= 1
    assert any(closure.evidence == ("lp",) for closure in result.proof if hasattr(closure, "evidence"))
    with pytest.raises(NoCertificate, match="ReLU splitting with exact LP bounds"):
        proof_documents(network, prop, result.proof, "queries", 0)
