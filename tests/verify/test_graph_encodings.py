"""Exact evaluation, the SMT-LIB text, Z3 and Marabou on graph networks (layers that read several activations).

The oracles are written here, independent of the engines: a Fraction
evaluation of the DAG that reads `AffineLayer.reads` itself, and sound
output bounds over a box by interval arithmetic in Fractions. Random
graphs (`graph_networks.random_graph`, weights on a grid of quarters so
the solvers are fast, some with an exact-rational fold) get two kinds of
property: one whose unsafe row a sampled point meets with a margin
(``sat``), and one whose threshold lies beyond the interval bound
(``unsat``). Every script must re-run to that status in z3 and in cvc5,
and a model either solver finds must evaluate exactly, in the network, to
an unsafe point with the outputs the solver computed. Then the engines:
Z3 proves and refutes what the oracles say, its counterexamples
validate, and Marabou never contradicts dense sampling or Z3. A graph's
SMT-LIB text is pinned by a golden file beside the chain goldens
(`test_smtlib_golden.py`).
"""

from __future__ import annotations

import importlib.util
import itertools
from fractions import Fraction

import numpy as np
import pytest
import z3
from graph_networks import random_graph

from certfsm import AffineLayer, Network
from certfsm.verify import check, exact_outputs
from certfsm.verify._property import Conjunction, Property
from certfsm.verify._recheck import recheck_folder
from certfsm.verify._smtlib import smtlib_script, write_smtlib
from certfsm.verify._validate import validate_counterexample

from test_smtlib_golden import GOLDEN, check_golden

TIMEOUT = 20.0
SEEDS = range(10)
MARGIN = Fraction(1, 8)


# --- the oracles ------------------------------------------------------------------


def fraction_outputs(network: Network, x) -> list[Fraction]:
    """The network at the rational point `x`, layer by layer over the activations each layer lists in `reads`."""
    activations = [[v if isinstance(v, Fraction) else Fraction(float(v)) for v in x]]
    last = len(network.layers) - 1
    for index, layer in enumerate(network.layers):
        inputs = [v for r in (layer.reads or (index,)) for v in activations[r]]
        values = [
            sum((w * v for w, v in zip(row, inputs)), b) for row, b in zip(layer.exact_weight(), layer.exact_bias())
        ]
        activations.append([max(v, Fraction(0)) for v in values] if index < last else values)
    return activations[-1]


def fraction_bounds(network: Network, lower, upper) -> list[tuple[Fraction, Fraction]]:
    """Sound (lowest, highest) of every output over the box, by interval arithmetic in Fractions."""
    activations = [[(Fraction(lo), Fraction(hi)) for lo, hi in zip(lower, upper)]]
    last = len(network.layers) - 1
    for index, layer in enumerate(network.layers):
        inputs = [pair for r in (layer.reads or (index,)) for pair in activations[r]]
        values = []
        for row, bias in zip(layer.exact_weight(), layer.exact_bias()):
            low = bias + sum(w * (lo if w > 0 else hi) for w, (lo, hi) in zip(row, inputs))
            high = bias + sum(w * (hi if w > 0 else lo) for w, (lo, hi) in zip(row, inputs))
            values.append((max(low, Fraction(0)), max(high, Fraction(0))) if index < last else (low, high))
        activations.append(values)
    return activations[-1]


def with_fold(network: Network, index: int) -> Network:
    """`network` with layer `index` replaced by an exact-rational fold: its weights and biases divided by 3."""
    layer = network.layers[index]
    third = Fraction(1, 3)
    rows = tuple(tuple(Fraction(float(w)) * third for w in row) for row in layer.weight)
    bias = tuple(Fraction(float(b)) * third for b in layer.bias)
    folded = AffineLayer(
        [[float(v) for v in row] for row in rows],
        [float(v) for v in bias],
        f"{layer.source}/3",
        exact=(rows, bias),
        reads=layer.reads,
    )
    return network.replace(layers=network.layers[:index] + (folded,) + network.layers[index + 1 :])


def graph_problem(seed: int, expected: str) -> tuple[Network, Property]:
    """A random graph network and a property whose status is `expected` ("sat" or "unsat") by the oracles.

    Two disjuncts in random order: one unreachable by the interval bound
    (every output row's threshold a margin below its lowest value), and
    one that is the same for "unsat" and, for "sat", is met with the
    margin at a sampled point of the box. Rows are strict or not at random.
    """
    rng = np.random.default_rng(seed)
    hidden = [int(rng.integers(2, 4)), int(rng.integers(1, 4))]
    network = random_graph(rng, 2, hidden, 2, grid=0.25)
    if seed % 3 == 0:
        network = with_fold(network, int(rng.integers(len(network.layers))))
    lower = rng.integers(-4, 2, 2) / 4
    upper = lower + rng.integers(1, 5, 2) / 4
    bounds = fraction_bounds(network, lower, upper)

    def row() -> np.ndarray:
        while not np.any(coefficients := rng.integers(-2, 3, 2).astype(float)):
            pass
        return coefficients

    def unreachable(coefficients: np.ndarray) -> Fraction:
        lowest = sum(Fraction(c) * (lo if c > 0 else hi) for c, (lo, hi) in zip(coefficients, bounds))
        return lowest - MARGIN

    disjuncts = []
    for kind in ("unsat", expected):
        coefficients = row()
        if kind == "sat":
            point = np.round((lower + rng.random(2) * (upper - lower)) * 16) / 16
            outputs = fraction_outputs(network, point)
            threshold = sum(Fraction(c) * y for c, y in zip(coefficients, outputs)) + MARGIN
        else:
            threshold = unreachable(coefficients)
        disjuncts.append(
            Conjunction([coefficients], [float(threshold)], exact_b=(threshold,), strict=(bool(rng.integers(2)),))
        )
    order = rng.permutation(2)
    return network, Property(f"graph_{seed}_{expected}", lower, upper, tuple(disjuncts[i] for i in order))


PROBLEMS = [(seed, expected) for seed in SEEDS for expected in ("sat", "unsat")]


def is_unsafe_at(prop: Property, x: list[Fraction], outputs: list[Fraction]) -> bool:
    """`x` lies in the exact box and `outputs` in the exact unsafe set."""
    inside = all(low <= v <= high for v, low, high in zip(x, prop.exact_lower, prop.exact_upper))
    return inside and prop.is_unsafe_exactly(outputs)


# --- the oracles and exact_outputs ------------------------------------------------


def test_the_problems_are_graphs_with_folds_and_mean_what_they_say():
    """The generator gives graphs (some with a fold) whose sat problems have an unsafe sample point."""
    networks = [graph_problem(seed, "sat")[0] for seed in SEEDS]
    assert not any(network.is_chain for network in networks)
    assert any(not network.is_exact for network in networks)
    for seed in SEEDS:
        network, prop = graph_problem(seed, "unsat")
        samples = np.random.default_rng(seed).uniform(prop.lower, prop.upper, (2000, 2))
        assert not np.any(prop.is_unsafe(network.evaluate(samples)))


@pytest.mark.parametrize("seed", range(20))
def test_exact_outputs_is_the_fraction_evaluation_of_the_dag(seed):
    rng = np.random.default_rng(100 + seed)
    hidden = [int(n) for n in rng.integers(1, 5, int(rng.integers(1, 4)))]
    network = random_graph(rng, int(rng.integers(1, 4)), hidden, int(rng.integers(1, 4)), skip=0.6)
    if seed % 2:
        network = with_fold(network, int(rng.integers(len(network.layers))))
    for x in rng.normal(0.0, 2.0, (5, network.n_inputs)).astype(np.float32):
        exact = exact_outputs(network, x)
        assert exact == fraction_outputs(network, x)
        floats = network.evaluate(x.astype(np.float64))
        assert np.allclose([float(v) for v in exact], floats, rtol=1e-9, atol=1e-9)


def test_exact_outputs_differs_from_a_chain_reading_of_the_same_layers():
    """The input skip matters: dropping it (a chain of the same widths) changes the exact outputs."""
    skip = Network(
        (
            AffineLayer([[1.0, 0.0]], [0.0], "hidden"),
            AffineLayer([[2.0, 0.5, -1.0]], [0.25], "output", reads=(0, 1)),
        )
    )
    assert exact_outputs(skip, [3.0, -1.0]) == [Fraction(2 * 3 + 0.5 * -1 - 3 + 0.25)]


# --- the SMT-LIB text -------------------------------------------------------------


def skip_graph() -> tuple[Network, Property]:
    """A hand-made graph: layer 1 reads the input and layer 0, the output reads layer 0 and layer 1, one fold."""
    third = (Fraction(1, 3), Fraction(-2, 3))
    return (
        Network(
            (
                AffineLayer([[1.0, -0.5], [0.25, 1.0]], [0.0, -0.125], "Gemm_0"),
                AffineLayer(
                    [[float(third[0]), 0.0, 1.0, float(third[1])]],
                    [0.5],
                    "Gemm_1+Div",
                    exact=(((third[0], Fraction(0), Fraction(1), third[1]),), (Fraction(1, 2),)),
                    reads=(0, 1),
                ),
                AffineLayer([[1.0, -1.0, 0.75], [0.0, 0.5, -1.0]], [0.0, 0.1], "Gemm_2", reads=(1, 2)),
            ),
            source_path="skip.onnx",
        ),
        Property("skip", [-1.0, 0.0], [1.0, 2.0], (Conjunction([[1.0, -1.0]], [0.0], strict=(True,)),)),
    )


def test_graph_script_is_the_golden_text():
    """Every layer says what it reads; each equation is over those activations' variables, in their order."""
    network, prop = skip_graph()
    text = smtlib_script(network, prop, "unknown", np.array([0, 1, -1], dtype=np.int8))
    assert (
        "; layer 1 (Gemm_1+Div): affine and ReLU, 1 x 4, exact rational weights of a rounded fold, reads X, H_0\n"
        in text
    )
    assert "(assert (= Z_1_0 (+ (* (/ 1.0 3.0) X_0) H_0_0 (* (- (/ 2.0 3.0)) H_0_1) 0.5)))\n" in text
    assert "; layer 2 (Gemm_2): output layer, 2 x 3, reads H_0, H_1\n" in text
    check_golden(GOLDEN / "graph_skip.smt2", text)


def _z3_model(text: str, names: list[str]) -> dict[str, Fraction]:
    context = z3.Context()
    solver = z3.Solver(ctx=context)
    solver.add(z3.parse_smt2_string(text, ctx=context))
    assert solver.check() == z3.sat
    model = solver.model()
    return {name: model.eval(z3.Real(name, context), model_completion=True).as_fraction() for name in names}


def _cvc5_model(text: str, names: list[str]) -> dict[str, Fraction]:
    import cvc5

    solver = cvc5.Solver()
    solver.setOption("produce-models", "true")
    symbols = cvc5.SymbolManager(solver)
    parser = cvc5.InputParser(solver, symbols)
    parser.setStringInput(cvc5.InputLanguage.SMT_LIB_2_6, text, "query")
    answer = None
    while not (command := parser.nextCommand()).isNull():
        name = command.getCommandName()
        if name == "check-sat":
            answer = solver.checkSat()
            break
        if not (name == "set-info" and ":status" in command.toString()):
            command.invoke(solver, symbols)
    assert answer is not None and answer.isSat()
    terms = {term.getSymbol(): term for term in symbols.getDeclaredTerms()}
    return {name: solver.getValue(terms[name]).getRealValue() for name in names}


def _needs_cvc5():
    if importlib.util.find_spec("cvc5") is None:
        pytest.skip("the cvc5 package is not installed; pip install cvc5")


@pytest.mark.parametrize("solver", ["z3", "cvc5"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_sat_model_is_an_unsafe_point_of_the_network(seed, solver):
    """The model's inputs evaluate exactly, in the DAG, to the model's outputs, and those are unsafe."""
    if solver == "cvc5":
        _needs_cvc5()
    network, prop = graph_problem(seed, "sat")
    inputs = [f"X_{i}" for i in range(network.n_inputs)]
    outputs = [f"Y_{j}" for j in range(network.n_outputs)]
    model = (_z3_model if solver == "z3" else _cvc5_model)(smtlib_script(network, prop, "sat"), inputs + outputs)
    x = [model[name] for name in inputs]
    exact = fraction_outputs(network, x)
    assert [model[name] for name in outputs] == exact
    assert is_unsafe_at(prop, x, exact)


@pytest.mark.parametrize("solver", ["z3", "cvc5"])
def test_written_graph_files_rerun_to_their_status(tmp_path, solver):
    """`certfsm recheck`'s solvers confirm every file: sat where a point is unsafe, unsat where bounds say so."""
    if solver == "cvc5":
        _needs_cvc5()
    for seed, expected in PROBLEMS:
        network, prop = graph_problem(seed, expected)
        verdict = "violated" if expected == "sat" else "proved"
        write_smtlib(tmp_path / f"{prop.name}.smt2", network, prop, verdict=verdict, engine="test", seconds=0.0)
    rows = recheck_folder(tmp_path, solver=solver, timeout=30)
    assert len(rows) == len(PROBLEMS)
    assert [(row.file, row.answer, row.outcome) for row in rows] == [
        (row.file, row.recorded_status, "confirmed") for row in rows
    ]


def test_a_dropped_skip_is_caught_by_the_model_check():
    """The check can fail: the same script with the skip's term deleted no longer computes the network."""
    network, _ = skip_graph()
    everything = Property("point", [1.0, 1.0], [1.0, 1.0], (Conjunction(np.zeros((0, 2)), np.zeros(0)),))
    text = smtlib_script(network, everything)
    broken = text.replace(" (* (/ 1.0 3.0) X_0)", "")
    assert broken != text
    expected = fraction_outputs(network, [Fraction(1), Fraction(1)])
    assert list(_z3_model(text, ["Y_0", "Y_1"]).values()) == expected
    assert list(_z3_model(broken, ["Y_0", "Y_1"]).values()) != expected


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_validation_on_a_graph_accepts_a_tie_only_where_the_row_is_not_strict(seed):
    """float64, onnxruntime (a Concat where a layer reads several) and the exact DAG agree on a dyadic tie."""
    network, _ = graph_problem(seed, "sat")
    assert network.is_exact
    x = np.array([0.25, -0.5])
    value = fraction_outputs(network, x)[0]
    for strict in (False, True):
        tie = Conjunction([[1.0, 0.0]], [float(value)], exact_b=(value,), strict=(strict,))
        validation = validate_counterexample(network, Property("tie", x - 1, x + 1, (tie,)), x)
        assert validation.ok is not strict, validation.reason
        assert validation.outputs_onnxruntime is not None or strict


# --- the Z3 engine ------------------------------------------------------------------


def _check_violation(network: Network, prop: Property, result) -> None:
    assert result.verdict == "violated", result.reason
    assert validate_counterexample(network, prop, result.counterexample).ok
    x = [Fraction(float(v)) for v in result.counterexample]
    assert is_unsafe_at(prop, x, fraction_outputs(network, x))


@pytest.mark.parametrize("seed, expected", PROBLEMS)
def test_z3_engine_proves_and_refutes_graphs(seed, expected):
    from certfsm.verify import _z3

    network, prop = graph_problem(seed, expected)
    result = _z3.check(network, prop, TIMEOUT)
    if expected == "unsat":
        assert result.verdict == "proved", result.reason
    else:
        _check_violation(network, prop, result)


@pytest.mark.parametrize("seed", SEEDS[:4])
def test_check_with_engine_z3_on_graphs(seed):
    for expected in ("sat", "unsat"):
        network, prop = graph_problem(seed, expected)
        result = check(network, prop, engine="z3", timeout=TIMEOUT)
        if expected == "unsat":
            assert (result.verdict, result.engine) == ("proved", "z3"), result.reason
        else:
            _check_violation(network, prop, result)


# --- Marabou ------------------------------------------------------------------------


def _marabou():
    if importlib.util.find_spec("maraboupy") is None:
        pytest.skip("maraboupy is not installed")
    from certfsm.verify import _marabou

    if not _marabou.is_available():
        pytest.skip("maraboupy does not import")
    return _marabou


def _dense_samples(prop: Property, count: int = 4096) -> np.ndarray:
    corners = np.array(list(itertools.product(*zip(prop.lower, prop.upper))))
    uniform = np.random.default_rng(0).uniform(prop.lower, prop.upper, (count, prop.n_inputs))
    return np.vstack([corners, uniform])


@pytest.mark.parametrize("isolate", [True, False])
@pytest.mark.parametrize("seed, expected", PROBLEMS)
def test_marabou_decides_graphs_and_never_contradicts_sampling_or_z3(seed, expected, isolate):
    """Marabou's answer never contradicts dense sampling or Z3, and on these clear margins it is the right one.

    A sat problem's unsafe row is met with a margin of 1/8 at a sampled
    point and an unsat one misses the sound bound by 1/8: no thin sets, so
    an encoding that computes another network (a skip dropped) shows up
    as a wrong or missing answer, not only as a contradiction.
    """
    from certfsm.verify import _z3

    marabou = _marabou()
    network, prop = graph_problem(seed, expected)
    result = marabou.check(network, prop, TIMEOUT, isolate=isolate)
    sampled_unsafe = bool(np.any(prop.is_unsafe(network.evaluate(_dense_samples(prop)))))
    if sampled_unsafe:
        assert result.verdict != "proved", f"Marabou proved what sampling violates: {result.reason}"
    exact = _z3.check(network, prop, TIMEOUT).verdict
    assert {result.verdict, exact} != {"proved", "violated"}, f"Marabou said {result.verdict}, Z3 {exact}"
    if expected == "sat":
        _check_violation(network, prop, result)
    else:
        assert result.verdict == "proved", result.reason


# --- the report ---------------------------------------------------------------------


def test_a_graph_report_says_how_the_network_is_wired_and_rechecks(tmp_path):
    """summary.json lists each layer's reads for a graph (not for a chain); its files re-run to their verdicts."""
    from certfsm.verify import _z3
    from certfsm.verify._report import InputNaming, model_summary, write_report

    problems = [graph_problem(1, "sat"), graph_problem(1, "unsat")]
    network = problems[0][0]
    results = [_z3.check(network, prop, TIMEOUT) for _, prop in problems]
    assert [r.verdict for r in results] == ["violated", "proved"]
    summary = write_report(
        tmp_path / "r",
        title="graph",
        network=network,
        properties=[prop for _, prop in problems],
        results=results,
        naming=InputNaming.plain(network.n_inputs, network.n_outputs),
        settings={"engine": "z3", "timeout": TIMEOUT, "jobs": 1},
    )
    assert summary["model"]["reads"] == [list(chosen) for chosen in network.reads]
    assert any(len(chosen) > 1 for chosen in summary["model"]["reads"])
    assert "reads" not in model_summary(skip_graph()[0].replace(layers=(AffineLayer([[1.0, 0.0]], [0.0], "only"),)))
    rows = recheck_folder(tmp_path / "r", solver="z3", timeout=30)
    assert [(row.answer, row.outcome) for row in rows] == [("sat", "confirmed"), ("unsat", "confirmed")]
