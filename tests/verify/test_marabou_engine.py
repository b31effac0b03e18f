"""The Marabou back-end on its own: encoding, verdicts, isolation, failures.

Every network here is small enough that the answer is obvious by hand;
the counterexamples are re-evaluated with `Network.evaluate` rather than
compared with hard-coded points. Crashes and hangs of the child process
are simulated with the documented test hook `_marabou.FAULT_ENV`.
"""

from __future__ import annotations

import csv
import math
import multiprocessing
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from certfsm import EngineError
from certfsm import AffineLayer, Network, load_onnx
from certfsm.verify import _marabou, parse_vnnlib
from certfsm.verify._property import Conjunction, Property
from one_input_queries import assert_real_counterexample, at_least, at_most, box


if not _marabou.is_available():
    pytest.skip("maraboupy is not importable; pip install 'maraboupy>=2.0,<2.1'", allow_module_level=True)

# y = relu(x) - relu(-x), which is x itself, on [-1, 1].
IDENTITY = Network(
    (
        AffineLayer([[1.0], [-1.0]], [0.0, 0.0], "hidden"),
        AffineLayer([[1.0, -1.0]], [0.0], "output"),
    )
)


def random_network(seed: int, sizes=(5, 50, 50, 50, 5)) -> Network:
    rng = np.random.default_rng(seed)
    return Network(
        tuple(
            AffineLayer(rng.normal(size=(n_out, n_in)) / np.sqrt(n_in), rng.normal(size=n_out) * 0.1, f"layer{k}")
            for k, (n_in, n_out) in enumerate(zip(sizes, sizes[1:]))
        )
    )


def hard_query() -> tuple[Network, Property]:
    """UNSAT (sampled y0 - y1 stays below 1), but Marabou needs more than 60 s for it."""
    network = random_network(0)
    return network, Property("hard", -np.ones(5), np.ones(5), (Conjunction([[-1.0, 1.0, 0, 0, 0]], [-3.0]),))


@pytest.mark.parametrize("isolate", [True, False], ids=["isolated", "in-process"])
class TestVerdicts:
    def test_unreachable_output_is_proved(self, isolate):
        result = _marabou.check(IDENTITY, box(at_least(1.5)), 10, isolate=isolate)
        assert (result.verdict, result.engine, result.reason) == ("proved", "marabou", "Marabou: UNSAT")
        assert result.stats["exit_codes"] == ["unsat"]

    def test_reachable_output_is_violated_with_a_real_counterexample(self, isolate):
        prop = box(at_least(0.5))
        assert_real_counterexample(IDENTITY, prop, _marabou.check(IDENTITY, prop, 10, isolate=isolate))

    def test_boundary_of_the_box_counts_as_unsafe(self, isolate):
        prop = box(at_least(1.0))
        result = _marabou.check(IDENTITY, prop, 10, isolate=isolate)
        assert_real_counterexample(IDENTITY, prop, result)
        assert result.counterexample[0] == 1.0

    @pytest.mark.parametrize("split", [False, True], ids=["native", "split"])
    def test_disjunction_is_violated_through_its_reachable_branch(self, isolate, split):
        prop = box(at_least(1.5), at_most(-0.75))
        result = _marabou.check(IDENTITY, prop, 10, isolate=isolate, split_disjuncts=split)
        assert_real_counterexample(IDENTITY, prop, result)
        assert result.counterexample[0] <= -0.75

    @pytest.mark.parametrize("split", [False, True], ids=["native", "split"])
    def test_disjunction_of_unreachable_branches_is_proved(self, isolate, split):
        result = _marabou.check(IDENTITY, box(at_least(1.5), at_most(-1.5)), 10, isolate=isolate, split_disjuncts=split)
        assert result.verdict == "proved", result.reason
        assert result.stats["queries"] == (2 if split else 1)

    def test_empty_unsafe_set_is_proved_by_an_unsat_answer(self, isolate):
        result = _marabou.check(IDENTITY, box(), 10, isolate=isolate)
        assert result.verdict == "proved"
        assert result.stats["exit_codes"] == ["unsat"]

    def test_degenerate_box_is_a_single_point(self, isolate):
        hit = box(at_least(0.25), lower=0.25, upper=0.25)
        result = _marabou.check(IDENTITY, hit, 10, isolate=isolate)
        assert_real_counterexample(IDENTITY, hit, result)
        assert result.counterexample[0] == 0.25
        miss = box(at_least(0.3), lower=0.25, upper=0.25)
        assert _marabou.check(IDENTITY, miss, 10, isolate=isolate).verdict == "proved"

    def test_all_zero_rows_are_decided_before_marabou(self, isolate):
        never = Conjunction([[0.0], [-1.0]], [-1.0, -0.5])
        assert _marabou.check(IDENTITY, box(never), 10, isolate=isolate).verdict == "proved"
        always = Conjunction([[0.0], [-1.0]], [1.0, -0.5])
        prop = box(always)
        assert_real_counterexample(IDENTITY, prop, _marabou.check(IDENTITY, prop, 10, isolate=isolate))

    def test_conjunction_without_rows_makes_every_output_unsafe(self, isolate):
        prop = box(at_least(1.5), Conjunction(np.zeros((0, 1)), []))
        assert_real_counterexample(IDENTITY, prop, _marabou.check(IDENTITY, prop, 10, isolate=isolate))


def test_two_layer_network_with_several_outputs():
    """y0 = |x0 - x1|, y1 = x0 - x1 on [0, 1]^2: |x0 - x1| >= 0.75 with x0 < x1 is reachable."""
    network = Network(
        (
            AffineLayer([[1.0, -1.0], [-1.0, 1.0]], [0.0, 0.0], "hidden"),
            AffineLayer([[1.0, 1.0], [1.0, -1.0]], [0.0, 0.0], "output"),
        )
    )
    prop = Property("abs", [0.0, 0.0], [1.0, 1.0], (Conjunction([[-1.0, 0.0], [0.0, 1.0]], [-0.75, 0.0]),))
    result = _marabou.check(network, prop, 10)
    assert_real_counterexample(network, prop, result)
    assert result.counterexample[1] - result.counterexample[0] >= 0.75
    too_far = Property("abs", [0.0, 0.0], [1.0, 1.0], (Conjunction([[-1.0, 0.0]], [-1.25]),))
    assert _marabou.check(network, too_far, 10).verdict == "proved"


def _without_guard(monkeypatch) -> None:
    """Switch off the sampling guard, so that a test sees Marabou's own answer."""
    monkeypatch.setattr(_marabou, "_sampled_counterexample", lambda network, prop: None)


def test_unit_with_all_zero_weights_is_encoded_soundly(monkeypatch):
    """Found by the random tests: dropping zero addends left ``-pre = 1.5`` and Marabou said UNSAT.

    Here every point of the box is unsafe (all first-layer ReLUs are off).
    """
    _without_guard(monkeypatch)
    network = Network(
        (
            AffineLayer([[-2.0, -0.5], [0.25, 0.5], [-1.0, -2.0]], [3.0, -0.5, -2.0], "layer0"),
            AffineLayer([[0, 1, 1], [0.75, 0.75, 1], [0, 0, 0], [0.25, 0, 0]], [1.0, 1.0, -1.5, 0.5], "layer1"),
            AffineLayer([[-1.5, -0.25, -3, 4], [-1, -1, 1, 0.5], [-0.75, 1.5, 0, -2]], [-2.0, 0.0, -0.5], "layer2"),
        )
    )
    prop = Property("zero-row", [1.75, -0.5], [2.0, 0.75], (Conjunction([[-2.0, -1.0, 1.0]], [6.21875]),))
    assert_real_counterexample(network, prop, _marabou.check(network, prop, 10))


def test_network_ignoring_its_inputs_gives_a_witness():
    """With no input in any equation maraboupy used to fail reading the solution (map::at)."""
    network = Network(
        (AffineLayer(np.zeros((2, 2)), [0.0, 0.0], "layer0"), AffineLayer(np.zeros((1, 2)), [0.0], "layer1"))
    )
    prop = Property("constant", [0.0, 0.0], [1.0, 1.0], (Conjunction([[-1.0]], [0.5]),))
    assert_real_counterexample(network, prop, _marabou.check(network, prop, 10))


# y = 0.75 - 0.5 relu(x) - 4 relu(0.875 - 1.5 x) = 5.5 x - 2.75 on [0.5, 0.55]: y <= 0 only at x = 0.5.
CORNER_TIE = Network(
    (AffineLayer([[1.0], [-1.5]], [0.0, 0.875], "hidden"), AffineLayer([[-0.5, -4.0]], [0.75], "output"))
)
CORNER_TIE_PROP = box(at_most(0.0), lower=0.5, upper=0.55)


def test_tie_at_a_box_corner_is_not_proved(monkeypatch):
    _without_guard(monkeypatch)
    result = _marabou.check(CORNER_TIE, CORNER_TIE_PROP, 10)
    assert_real_counterexample(CORNER_TIE, CORNER_TIE_PROP, result)
    assert result.counterexample[0] == 0.5


@pytest.mark.xfail(
    strict=True, reason="maraboupy 2.0.0 answers UNSAT on this tie; if this passes, revisit OUTPUT_MARGIN"
)
def test_marabou_without_the_margin_finds_the_corner_tie(monkeypatch):
    _without_guard(monkeypatch)
    monkeypatch.setattr(_marabou, "OUTPUT_MARGIN", 0.0)
    assert _marabou.check(CORNER_TIE, CORNER_TIE_PROP, 10).verdict != "proved"


def test_tie_at_an_interior_point_is_found_by_the_exact_query():
    """y0 = relu(x), y1 = 1 - relu(x) are equal only at x = 0.5: the robust witness misses, the exact one hits."""
    network = Network((AffineLayer([[1.0]], [0.0], "hidden"), AffineLayer([[1.0], [-1.0]], [0.0, 1.0], "output")))
    prop = Property("tie", [0.0], [1.0], (Conjunction([[1.0, -1.0], [-1.0, 1.0]], [0.0, 0.0]),))
    result = _marabou.check(network, prop, 10)
    assert_real_counterexample(network, prop, result)
    assert result.counterexample[0] == 0.5


def test_property_holding_by_less_than_the_margin_is_unknown():
    result = _marabou.check(IDENTITY, box(at_least(1.0 + 5e-5)), 10)
    assert result.verdict == "unknown"
    assert result.reason == (
        "Marabou: UNSAT only without the robustness margin 0.0001; the property holds "
        "by less than the margin, or Marabou missed a thin violation"
    )
    assert result.stats["exit_codes"] == ["sat", "unsat"]


def test_property_holding_by_more_than_the_margin_is_proved():
    assert _marabou.check(IDENTITY, box(at_least(1.0 + 1e-3)), 10).verdict == "proved"


def test_sampling_guard_overrules_a_wrong_unsat(monkeypatch):
    monkeypatch.setattr(_marabou, "_solve", lambda query: _marabou._Answer("unsat"))
    prop = box(at_least(0.5))
    for isolate in (True, False):
        result = _marabou.check(IDENTITY, prop, 10, isolate=isolate)
        assert_real_counterexample(IDENTITY, prop, result)
        assert result.reason == "Marabou answered UNSAT, but a sampled point re-evaluates unsafe (a Marabou bug)"


@pytest.mark.slow  # a second of real Marabou search; the fast set maps a stubbed TIMEOUT and kills a hanging child
def test_timeout_comes_back_unknown_not_proved():
    network, prop = hard_query()
    started = time.monotonic()
    result = _marabou.check(network, prop, 1)
    elapsed = time.monotonic() - started
    assert result.verdict == "unknown"
    assert result.reason == "Marabou timed out after 1 s"
    assert elapsed < 30.0, "the 1 s timeout was not applied (the query needs more than 60 s)"


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("exit", r"^Marabou crashed: exit status 3$"),
        ("segv", r"^Marabou crashed: killed by signal SIGSEGV$"),
    ],
)
def test_a_crashing_child_comes_back_unknown(monkeypatch, fault, reason):
    monkeypatch.setenv(_marabou.FAULT_ENV, fault)
    result = _marabou.check(IDENTITY, box(at_least(1.5)), 10)
    assert result.verdict == "unknown"
    assert result.stats["exit_codes"] == ["CRASH"]
    assert re.match(reason, result.reason), result.reason


@pytest.mark.slow
def test_a_hanging_child_is_killed_after_the_grace_period(monkeypatch):
    monkeypatch.setenv(_marabou.FAULT_ENV, "hang")
    monkeypatch.setattr(_marabou, "_GRACE_SECONDS", 0.5)
    started = time.monotonic()
    result = _marabou.check(IDENTITY, box(at_least(1.5)), 1)
    assert result.verdict == "unknown"
    killed = r"^Marabou crashed: no answer within 1\.\d s \(its timeout plus grace\), killed$"
    assert re.match(killed, result.reason), result.reason
    assert time.monotonic() - started < 30.0, "the hanging child was not killed"


@pytest.mark.parametrize("exit_code", ["TIMEOUT", "ERROR", "UNKNOWN", "QUIT_REQUESTED", "Unsat?"])
def test_anything_but_unsat_or_sat_is_unknown(monkeypatch, exit_code):
    monkeypatch.setattr(_marabou, "_solve", lambda query: _marabou._Answer(exit_code, reason="stub"))
    for isolate in (True, False):
        result = _marabou.check(IDENTITY, box(at_least(1.5)), 10, isolate=isolate)
        assert (result.verdict, result.reason) == ("unknown", "stub")


def test_exit_code_is_read_case_insensitively(monkeypatch):
    monkeypatch.setattr(_marabou, "_solve", lambda query: _marabou._Answer("UNSAT"))
    assert _marabou.check(IDENTITY, box(at_least(1.5)), 10, isolate=False).verdict == "proved"


def test_spurious_sat_is_unknown_with_the_point(monkeypatch):
    """A SAT witness that does not re-evaluate (here: y = 0.2 < 0.5) must not become violated."""
    monkeypatch.setattr(_marabou, "_solve", lambda query: _marabou._Answer("sat", np.array([0.2])))
    result = _marabou.check(IDENTITY, box(at_least(0.5)), 10)
    assert result.verdict == "unknown"
    assert result.reason.startswith("spurious counterexample from Marabou: ")
    assert result.stats["marabou_point"] == [0.2]


def test_witness_a_hair_outside_the_box_is_clipped(monkeypatch):
    monkeypatch.setattr(_marabou, "_solve", lambda query: _marabou._Answer("sat", np.array([1.0 + 1e-12])))
    prop = box(at_least(1.0))
    result = _marabou.check(IDENTITY, prop, 10)
    assert_real_counterexample(IDENTITY, prop, result)
    assert result.counterexample[0] == 1.0


def test_witness_on_the_wrong_side_of_a_tie_is_nudged_inside(monkeypatch):
    """Marabou's LP vertices sit on the unsafe boundary, sometimes 1e-16 outside it."""
    monkeypatch.setattr(_marabou, "_solve", lambda query: _marabou._Answer("sat", np.array([0.5 - 1e-15])))
    prop = box(at_least(0.5))
    result = _marabou.check(IDENTITY, prop, 10)
    assert_real_counterexample(IDENTITY, prop, result)


def test_check_works_inside_a_daemonic_pool_worker():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        verdict = pool.apply(_verdict_in_worker)
    assert verdict == "proved"


def _verdict_in_worker() -> str:
    return _marabou.check(IDENTITY, box(at_least(1.5)), 10).verdict


def test_the_child_process_is_reaped(monkeypatch):
    forked = []

    def recording_fork():
        pid = real_fork()
        if pid:
            forked.append(pid)
        return pid

    real_fork = os.fork
    monkeypatch.setattr(os, "fork", recording_fork)
    _marabou.check(IDENTITY, box(at_least(0.5)), 10)
    assert forked
    for pid in forked:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


@pytest.mark.slow
def test_the_solver_dies_with_a_killed_caller():
    """A worker killed by the orchestrator must not leave Marabou running (PR_SET_PDEATHSIG)."""
    code = (
        f"import os; os.environ[{_marabou.FAULT_ENV!r}] = 'hang'\n"
        "from certfsm import AffineLayer, Network\n"
        "from certfsm.verify._property import Conjunction, Property\n"
        "from certfsm.verify import _marabou\n"
        "network = Network((AffineLayer([[1.0]], [0.0], 'only'),))\n"
        "_marabou.check(network, Property('p', [0.0], [1.0], (Conjunction([[-1.0]], [-2.0]),)), 60)\n"
    )
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists():
        pytest.skip("this kernel does not list child processes in /proc/<pid>/task/<tid>/children")
    caller = subprocess.Popen([sys.executable, "-c", code])
    children = Path(f"/proc/{caller.pid}/task/{caller.pid}/children")
    solver = []
    try:
        for _ in range(200):
            time.sleep(0.1)
            solver = children.read_text().split()
            if solver:
                break
    finally:
        caller.kill()
        caller.wait()
    assert solver, "the caller never forked a solver process"
    for _ in range(50):
        stat = Path(f"/proc/{solver[0]}/stat")
        state = stat.read_text().split()[2] if stat.exists() else "gone"
        if state in ("gone", "Z"):
            break
        time.sleep(0.1)
    assert state in ("gone", "Z"), f"solver process {solver[0]} still running (state {state})"


@pytest.mark.parametrize(
    ("timeout", "message"),
    [
        (
            0,
            r"^marabou: timeout=0 is not a positive number of seconds; "
            r"give e\.g\. timeout=60 \(Marabou reads 0 as 'no limit'\)$",
        ),
        (-1.0, r"^marabou: timeout=-1\.0 is not a positive number of seconds; "),
        (math.nan, r"^marabou: timeout=nan is not a positive number of seconds; "),
        (math.inf, r"^marabou: timeout=inf is not a positive number of seconds; "),
        ("60", r"^marabou: timeout='60' is not a positive number of seconds; "),
    ],
)
def test_bad_timeout_is_rejected(timeout, message):
    with pytest.raises(EngineError, match=message):
        _marabou.check(IDENTITY, box(at_least(0.5)), timeout)


def test_box_of_the_wrong_size_is_rejected():
    prop = Property("two", [0.0, 0.0], [1.0, 1.0], (at_least(0.5),))
    with pytest.raises(
        EngineError,
        match=r"^marabou: property 'two' bounds 2 inputs but the network takes 1; "
        r"give one \[lower, upper\] pair per network input$",
    ):
        _marabou.check(IDENTITY, prop, 10)


def test_unsafe_set_over_the_wrong_outputs_is_rejected():
    prop = box(at_least(0.5), Conjunction([[1.0, 0.0]], [0.0]))
    with pytest.raises(
        EngineError,
        match=r"^marabou: property 'case' unsafe\[1\] constrains 2 outputs but the network has 1; "
        r"give one column per network output$",
    ):
        _marabou.check(IDENTITY, prop, 10)


def test_importing_certfsm_verify_does_not_import_maraboupy():
    code = (
        "import sys, certfsm.verify, certfsm.verify._marabou; "
        "print(sorted(m for m in sys.modules if m.startswith('maraboupy')))"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize(("network_name", "vnnlib_name"), [("1_9", "prop_4"), ("3_3", "prop_4")])
def test_acasxu_instances_match_the_published_verdict(network_name, vnnlib_name, acasxu):
    root = acasxu
    onnx_path = f"onnx/ACASXU_run2a_{network_name}_batch_2000.onnx"
    with open(root / "instances.csv", newline="") as handle:
        expected = next(
            row["expected"]
            for row in csv.DictReader(handle)
            if row["onnx"] == onnx_path and row["vnnlib"] == f"vnnlib/{vnnlib_name}.vnnlib"
        )
    network = load_onnx(root / onnx_path)
    (prop,) = parse_vnnlib(root / "vnnlib" / f"{vnnlib_name}.vnnlib", network.n_inputs, network.n_outputs)
    result = _marabou.check(network, prop, 60)
    assert result.verdict == {"sat": "violated", "unsat": "proved"}[expected], result.reason
    if result.verdict == "violated":
        assert_real_counterexample(network, prop, result)
