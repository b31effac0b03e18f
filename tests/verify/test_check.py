"""The entry point `check`: every engine on small networks, splitting, sub-box Marabou, timeouts, both engines."""

from __future__ import annotations

import ctypes
import importlib.util
import multiprocessing
import os
import re
import time

import numpy as np
import pytest

from certfsm import EngineError
from certfsm import AffineLayer, Network
from certfsm.verify import _check, _falsify, _split
from certfsm.verify._check import check
from certfsm.verify._property import Conjunction, Property, chosen_conjunction
from certfsm.verify._result import Result

HAS_MARABOU = importlib.util.find_spec("maraboupy") is not None
HAS_Z3 = importlib.util.find_spec("z3") is not None
needs_marabou = pytest.mark.skipif(not HAS_MARABOU, reason="maraboupy is not installed")
needs_z3 = pytest.mark.skipif(not HAS_Z3, reason="z3-solver is not installed")


def _net(*layers) -> Network:
    return Network(
        tuple(AffineLayer(np.array(w, float), np.array(b, float), f"layer{k}") for k, (w, b) in enumerate(layers))
    )


IDENTITY = _net(([[1.0], [-1.0]], [0.0, 0.0]), ([[1.0, -1.0]], [0.0]))
# y = relu(x0 + x1) - 2 relu(x0 + x1 - 1): 0 at (0,0) and (1,1), 1 on the line x0 + x1 = 1
XOR = _net(([[1.0, 1.0], [1.0, 1.0]], [0.0, -1.0]), ([[1.0, -2.0]], [0.0]))
# y = 2 relu(1.5 x0 - x1 - 0.5) - 1.5 relu(-2 x0 - x1 + 0.5) + 1.5 relu(-0.5 x0 + 1.5 x1 + 1) - 2 relu(-2 x1 + 0.5):
# at most about 3.747 on [0, 1]^2, but whole-box bounds only show it is below 4.2
BUMPY = _net(
    ([[1.5, -1.0], [-2.0, -1.0], [-0.5, 1.5], [0.0, -2.0]], [-0.5, 0.5, 1.0, 0.5]),
    ([[2.0, -1.5, 1.5, -2.0]], [0.0]),
)
# scores (x, 1 - x, 0.25), argmax: token 2 never wins, token 0 wins for x >= 0.5
THREE_TOKENS = _net(([[1.0]], [0.0]), ([[1.0], [-1.0], [0.0]], [0.0, 1.0, 0.25]))


def _at_least(value: float) -> Conjunction:
    return Conjunction([[-1.0]], [-value], (f"y0 >= {value}",))


XOR_SAFE = Property("xor-above", [0.0, 0.0], [1.0, 1.0], (_at_least(1.25),))
BUMPY_SAFE = Property("bumpy-above", [0.0, 0.0], [1.0, 1.0], (_at_least(3.875),))
XOR_UNSAFE = Property("xor-reaches", [0.0, 0.0], [1.0, 1.0], (_at_least(0.75),))
TOKEN_NEVER = Property("token-2", [0.0], [1.0], (chosen_conjunction(2, 3, "argmax"),))
TOKEN_CHOSEN = Property("token-0", [0.0], [1.0], (chosen_conjunction(0, 3, "argmax", margin=0.5),))


def _force_pool(monkeypatch) -> None:
    """Start the worker processes at once (normally only searches longer than a second use them)."""
    monkeypatch.setattr(_check, "INLINE_SECONDS", 0.0)
    monkeypatch.setattr(_check, "POOL_MIN_BOXES_PER_JOB", 0)


def _assert_real_violation(result: Result, network: Network, prop: Property) -> None:
    assert result.verdict == "violated", result.reason
    assert prop.contains_input(result.counterexample)
    assert prop.unsafe_slack(network.evaluate(result.counterexample)) >= 0.0
    np.testing.assert_array_equal(result.outputs, network.evaluate(result.counterexample))


@pytest.mark.parametrize("jobs", [1, 2])
def test_auto_proves_with_splitting_what_whole_box_bounds_cannot(jobs, monkeypatch):
    from certfsm.verify import _bounds

    _force_pool(monkeypatch)
    assert _bounds.check(BUMPY, BUMPY_SAFE, 5.0).verdict == "unknown"
    result = check(BUMPY, BUMPY_SAFE, engine="bounds", timeout=30, jobs=jobs)
    assert result.verdict == "proved", result.reason
    assert result.engine == "bounds"
    assert result.stats["boxes"] > 1 and result.stats["closed_by_bounds"] >= 2
    assert result.stats["jobs"] == jobs and result.stats["workers"] == jobs


@pytest.mark.parametrize("jobs", [1, 2])
def test_auto_finds_and_validates_a_violation(jobs, monkeypatch):
    _force_pool(monkeypatch)
    result = check(XOR, XOR_UNSAFE, timeout=30, jobs=jobs)
    _assert_real_violation(result, XOR, XOR_UNSAFE)
    assert result.engine == "falsify"


def test_whole_box_bounds_settle_an_easy_case_without_splitting():
    result = check(IDENTITY, Property("far", [-1.0], [1.0], (_at_least(1.5),)), timeout=30, jobs=1)
    assert result.verdict == "proved"
    assert result.engine == "bounds"
    assert result.stats["boxes"] == 1
    assert result.reason == "bounds refute the unsafe set on the whole box"


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine", ["auto", "bounds", pytest.param("marabou", marks=needs_marabou), pytest.param("z3", marks=needs_z3)]
)
def test_every_engine_gives_the_known_answers(engine):
    proved = check(THREE_TOKENS, TOKEN_NEVER, engine=engine, timeout=30, jobs=1)
    assert proved.verdict == "proved", proved.reason
    violated = check(THREE_TOKENS, TOKEN_CHOSEN, engine=engine, timeout=30, jobs=1)
    _assert_real_violation(violated, THREE_TOKENS, TOKEN_CHOSEN)


@needs_marabou
def test_single_engine_runs_that_engine_on_the_whole_box_and_has_z3_confirm_a_marabou_proof():
    result = check(XOR, XOR_SAFE, engine="marabou", timeout=30, jobs=1)
    assert result.verdict == "proved"
    assert result.engine == "marabou+z3" and result.stats["cross_checked"] is True


@needs_marabou
def test_an_unconfirmed_marabou_proof_is_unknown_and_labelled(monkeypatch):
    from certfsm.verify import _z3

    monkeypatch.setattr(_z3, "check", lambda *args: Result("unknown", "z3", 0.0, "z3 timed out"))
    result = check(XOR, XOR_SAFE, engine="marabou", timeout=30, jobs=1)
    assert result.verdict == "unknown" and result.engine == "marabou"
    assert result.reason.startswith("Marabou alone, not cross-checked: ")
    assert result.stats["cross_checked"] is False


@needs_z3
def test_boxes_that_bounds_cannot_close_are_closed_by_an_exact_z3_query(monkeypatch):
    monkeypatch.setattr(_check, "ENGINE_DEPTH", 0)
    result = check(BUMPY, BUMPY_SAFE, timeout=30, jobs=1)
    assert result.verdict == "proved", result.reason
    assert result.engine == "bounds+z3"
    assert result.stats["closed_by_engine"] >= 1 and result.stats["engine_queries"] >= 1


def _marabou_first(monkeypatch):
    """Send every box to Marabou before Z3 (as on a large network with many unstable ReLUs)."""
    from certfsm.verify import _box_engine

    monkeypatch.setattr(_check, "ENGINE_DEPTH", 0)
    monkeypatch.setattr(_box_engine, "Z3_FIRST_UNSTABLE", -1)
    monkeypatch.setattr(_box_engine, "Z3_FIRST_NETWORK", 0)
    monkeypatch.setattr(_box_engine, "LP_NETWORK", -1)


@needs_marabou
@needs_z3
def test_a_marabou_unsat_that_z3_does_not_confirm_never_closes_a_box(monkeypatch):
    from certfsm.verify import _z3

    _marabou_first(monkeypatch)
    monkeypatch.setattr(_z3, "check", lambda *args: Result("unknown", "z3", 0.0, "z3 timed out"))
    result = check(BUMPY, BUMPY_SAFE, timeout=8, jobs=1)
    # The boxes Marabou called UNSAT were split further and closed by bounds alone.
    assert result.stats["marabou_unsat_unconfirmed"] >= 1 and result.stats["closed_by_engine"] == 0
    assert result.verdict == "unknown" or result.engine == "bounds", result.reason


@needs_marabou
@needs_z3
def test_a_wrong_marabou_unsat_on_a_violated_box_is_overruled_by_z3(monkeypatch):
    from certfsm.verify import _marabou

    _marabou_first(monkeypatch)
    _no_attacks(monkeypatch)
    monkeypatch.setattr(_marabou, "check", lambda *args: Result("proved", "marabou", 0.0, "marabou: UNSAT"))
    result = check(XOR, XOR_UNSAFE, timeout=30, jobs=1)
    _assert_real_violation(result, XOR, XOR_UNSAFE)
    assert result.stats["marabou_wrong_unsat"] >= 1


@needs_marabou
@needs_z3
def test_marabou_unsat_confirmed_by_z3_closes_the_box(monkeypatch):
    _marabou_first(monkeypatch)
    result = check(BUMPY, BUMPY_SAFE, timeout=30, jobs=1)
    assert result.verdict == "proved", result.reason
    assert result.engine == "bounds+z3" and result.stats["closed_by_engine"] >= 1


def _no_attacks(monkeypatch):
    monkeypatch.setattr(_falsify, "falsify", lambda *args, **kwargs: None)
    monkeypatch.setattr(_split, "_unsafe_points", lambda *args: [])
    monkeypatch.setattr(_split, "_attack", lambda *args: [])


@needs_z3
def test_an_engine_counterexample_on_a_sub_box_is_validated_and_reported(monkeypatch):
    monkeypatch.setattr(_check, "ENGINE_DEPTH", 0)
    _no_attacks(monkeypatch)
    result = check(XOR, XOR_UNSAFE, timeout=30, jobs=1)
    _assert_real_violation(result, XOR, XOR_UNSAFE)
    assert result.engine == "bounds+z3"


def test_bounds_engine_says_unknown_when_only_a_point_is_unsafe(monkeypatch):
    # y = -|x - 1/3| >= 0 holds only at x = 1/3: bounds never close the boxes around it.
    third = 1.0 / 3.0
    network = _net(([[1.0], [-1.0]], [-third, third]), ([[-1.0, -1.0]], [0.0]))
    prop = Property("point", [0.0], [1.0], (_at_least(0.0),))
    monkeypatch.setattr(_falsify, "falsify", lambda *args, **kwargs: None)
    monkeypatch.setattr(_split, "_unsafe_points", lambda *args: [])
    monkeypatch.setattr(_split, "_attack", lambda *args: [])
    monkeypatch.setattr(_check, "BOUNDS_ONLY_DEPTH", 20)
    result = check(network, prop, engine="bounds", timeout=30, jobs=1)
    assert result.verdict == "unknown"
    assert re.match(r"^bounds cannot close \d+ boxes after 20 splits$", result.reason)


HANG_SECONDS = 60.0
"""How long a planted hanging search sleeps; a timeout that waited for it would take this long."""


def _hanging_search(*args, **kwargs):
    time.sleep(HANG_SECONDS)


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_the_timeout_is_strict_and_leaves_no_worker_behind(monkeypatch, jobs):
    if jobs == 1:
        monkeypatch.setattr(
            _split, "search", lambda network, prop, objectives, boxes, deadline, **kw: _slow_search(deadline, boxes)
        )
    else:
        monkeypatch.setattr(_split, "search", _hanging_search)
        _force_pool(monkeypatch)
    started = time.monotonic()
    result = check(BUMPY, BUMPY_SAFE, timeout=1.0, jobs=jobs)
    elapsed = time.monotonic() - started
    assert result.verdict == "unknown"
    assert result.reason.startswith("timeout after 1.0 s, ")
    assert elapsed < HANG_SECONDS / 2, "check waited for the hanging search instead of stopping it"
    assert multiprocessing.active_children() == []


def _slow_search(deadline, boxes):
    time.sleep(max(0.0, deadline - time.monotonic()))
    return _split.Outcome(boxes, boxes.nothing())


def test_progress_reports_a_growing_closed_fraction_up_to_one():
    seen = []
    result = check(
        BUMPY, BUMPY_SAFE, timeout=30, jobs=1, progress=lambda fraction, message: seen.append((fraction, message))
    )
    assert result.verdict == "proved"
    fractions = [fraction for fraction, _ in seen]
    assert fractions == sorted(fractions)
    assert all(0.0 <= f <= 1.0 for f in fractions)
    assert seen[-1] == (1.0, "every box closed")
    assert len(seen) >= 2


@needs_z3
def test_both_engines_agree_on_a_proof_and_on_a_violation():
    proved = check(XOR, XOR_SAFE, engine="both", timeout=60, jobs=1)
    assert proved.verdict == "proved", proved.reason
    assert proved.engine == "both"
    assert proved.stats["sides"]["z3"]["verdict"] == "proved"
    assert proved.stats["sides"]["marabou"]["engine"] == "marabou"
    violated = check(XOR, XOR_UNSAFE, engine="both", timeout=60, jobs=1)
    _assert_real_violation(violated, XOR, XOR_UNSAFE)


@needs_z3
def test_both_engines_disagreeing_is_unknown_and_reported(monkeypatch):
    from certfsm.verify import _z3

    monkeypatch.setattr(_z3, "check", lambda network, prop, timeout: Result("proved", "z3", 0.0, "z3: UNSAT"))
    result = check(XOR, XOR_UNSAFE, engine="both", timeout=60, jobs=1)
    assert result.verdict == "unknown"
    assert result.reason.startswith("the engines disagree: marabou (falsify): violated")
    assert result.stats["disagreement"] is True


@needs_z3
def test_both_engines_need_both_proofs(monkeypatch):
    from certfsm.verify import _z3

    monkeypatch.setattr(_z3, "check", lambda network, prop, timeout: Result("unknown", "z3", 0.0, "z3 timed out"))
    result = check(XOR, XOR_SAFE, engine="both", timeout=60, jobs=1)
    assert result.verdict == "unknown"
    assert result.reason.startswith("the engines do not both prove it: marabou (marabou): proved")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"engine": "cplex"},
            r"^engine='cplex' is not one of auto, marabou, z3, both, bounds; give e\.g\. engine='auto'$",
        ),
        ({"timeout": -1}, r"^timeout=-1 is not a positive number of seconds; give e\.g\. timeout=60$"),
        ({"timeout": float("nan")}, r"^timeout=nan is not a positive number of seconds; "),
        ({"jobs": 0}, r"^jobs=0 is not a positive number of worker processes; give e\.g\. jobs=2 or None$"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, message):
    with pytest.raises(EngineError, match=message):
        check(XOR, XOR_SAFE, **kwargs)


def test_a_property_of_the_wrong_size_is_rejected():
    with pytest.raises(EngineError, match=r"^property 'token-2' bounds 1 inputs but the network takes 2; "):
        check(XOR, TOKEN_NEVER)
    wide = Property("wide", [0.0, 0.0], [1.0, 1.0], (Conjunction([[1.0, 1.0]], [0.0]),))
    with pytest.raises(EngineError, match=r"^property 'wide' unsafe\[0\] constrains 2 outputs but the network has 1; "):
        check(XOR, wide)


PR_SET_CHILD_SUBREAPER = 36


def _descendants(pid: int) -> set[int]:
    """Every live process below `pid` (Linux /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


@pytest.mark.slow
@needs_marabou
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs Linux /proc to list child processes")
def test_a_hanging_marabou_child_is_killed_with_its_worker_at_the_timeout(monkeypatch):
    from certfsm.verify import _marabou

    monkeypatch.setenv(_marabou.FAULT_ENV, "hang")
    _marabou_first(monkeypatch)
    monkeypatch.setattr(_check, "ENGINE_GRACE_SECONDS", 0.0)
    _force_pool(monkeypatch)
    libc = ctypes.CDLL(None)
    before = _descendants(os.getpid())
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphaned grandchildren stay our descendants
    try:
        started = time.monotonic()
        result = check(BUMPY, BUMPY_SAFE, timeout=2.0, jobs=2)
        assert result.verdict == "unknown"
        assert result.reason.startswith("timeout after 2.0 s")
        assert time.monotonic() - started < HANG_SECONDS / 2, "check waited for the hanging Marabou child"
        deadline = time.monotonic() + 3.0
        while _descendants(os.getpid()) - before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _descendants(os.getpid()) - before == set()
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0)
    assert result.stats["engine_queries"] >= 1


def test_a_network_without_hidden_layers_is_split_and_proved(monkeypatch):
    # y0 = x0 - x1 >= 0.9 and y1 = x0 + x1 <= 0.5 contradict on [0, 1]^2, but no single row is refuted.
    network = _net(([[1.0, -1.0], [1.0, 1.0]], [0.0, 0.0]))
    prop = Property("linear", [0.0, 0.0], [1.0, 1.0], (Conjunction([[-1.0, 0.0], [0.0, 1.0]], [-0.9, 0.5]),))
    monkeypatch.setattr(_falsify, "falsify", lambda *args, **kwargs: None)
    result = check(network, prop, engine="bounds", timeout=30, jobs=1)
    assert result.verdict == "proved", result.reason
    assert result.stats["boxes"] > 1


def test_attack_effort_follows_the_open_share_of_the_box():
    assert _check.attack_allowance(0.0, 0.0, 2) == 0.0
    assert _check.attack_allowance(0.0, 1.0, 2) == _check.FALSIFY_SECONDS
    open_box = _check.attack_allowance(0.0, 12.0, 2)
    mostly_proved = _check.attack_allowance(0.99, 12.0, 2)
    assert open_box == pytest.approx(_check.FALSIFY_SECONDS + _check.ATTACK_SHARE * 20.0)
    assert mostly_proved == pytest.approx(_check.FALSIFY_SECONDS + _check.ATTACK_SHARE * _check.ATTACK_FLOOR * 20.0)
    assert _check.attack_allowance(0.5, 12.0, 2) < open_box


def test_an_attack_task_aimed_at_open_boxes_finds_what_lies_in_them():
    from certfsm.verify._check_tasks import run_task

    # y = -|x - 1/3| + 0.01 >= 0 only within 0.01 of 1/3; the open box around it is what is attacked
    third = 1.0 / 3.0
    network = _net(([[1.0], [-1.0]], [-third, third]), ([[-1.0, -1.0]], [0.01]))
    prop = Property("near", [0.0], [1.0], (_at_least(0.0),))
    region = _falsify.Region(np.array([[0.3]]), np.array([[0.35]]), np.array([1.0]))
    objectives = _split.Objectives.of(prop, 1)
    candidate, _ = run_task((network, prop, objectives, None), ("attack", 3, 0.5, region))
    assert candidate is not None and abs(candidate[0] - third) <= 0.01 + 1e-12
