"""Inputs that make cycles fall back are told once: a reading without an input, metrics without an SLA metric.

The fallback itself is by design and must not change (docs/semantics.md,
"Cells" and "SLA paths"): every test also compares the decisions with a
controller whose warnings are silenced. The oracle for "once" is the list
of warnings recorded over many cycles; for "where", the warning's file,
which must be this one (the embedder's call), whichever path the cycle took.
"""

from __future__ import annotations

import re
import warnings

import pytest

from certfsm import runtime
from certfsm.machine import Reason
from certfsm.runtime import RuntimeInputWarning

INPUTS = ("compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth")
READING = [62.0, 40.0, 12.5, 71.0, 9.0]
GOOD = {"latency_ms": 4.0}


@pytest.fixture(scope="module")
def artifact_path(distilled_example):
    return distilled_example[2]


def silent_decisions(artifact_path, calls):
    """The decisions of a fresh controller over `calls` (reading, metrics), with every warning silenced."""
    controller = runtime.load(artifact_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [controller.step(reading, metrics, 0.0) for reading, metrics in calls]


def told(record) -> list[str]:
    """The messages of the RuntimeInputWarnings in `record`, each checked to point at this file."""
    found = [w for w in record if issubclass(w.category, RuntimeInputWarning)]
    assert all(w.filename == __file__ for w in found), [(w.filename, w.lineno) for w in found]
    return [str(w.message) for w in found]


@pytest.mark.parametrize(
    "metrics", [None, {}, {"latency": 4.0}], ids=["no metrics=", "empty mapping", "misspelt metric"]
)
def test_a_missing_sla_metric_is_told_once_with_the_metric_the_path_and_the_fix(artifact_path, metrics):
    controller = runtime.load(artifact_path)
    calls = [(READING, metrics)] * 40
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        decisions = [controller.step(reading, given, 0.0) for reading, given in calls]
    (message,) = told(record)
    assert re.match(r"SLA metric 'latency_ms' of path 'inference' is missing from metrics= ", message)
    assert "is a violation" in message and 'docs/semantics.md, "SLA paths"' in message
    assert "more than 2 in 16 cycles" in message and "pass metrics={'latency_ms': ...}" in message
    assert decisions == silent_decisions(artifact_path, calls)
    # violations 1 and 2 are within max_violations=2; the third breaches the path
    assert [d.reason == Reason.FALLBACK_SLA for d in decisions] == [False] * 2 + [True] * 38


def test_a_metric_given_as_none_is_a_violation_without_a_warning(artifact_path):
    controller = runtime.load(artifact_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        decisions = [controller.step(READING, {"latency_ms": None}, 0.0) for _ in range(10)]
    assert decisions[-1].reason == Reason.FALLBACK_SLA


def test_a_mapping_reading_without_an_input_is_told_once_per_input_naming_it(artifact_path):
    controller = runtime.load(artifact_path)
    full = dict(zip(INPUTS, READING))
    without_temperature = {k: v for k, v in full.items() if k != "temperature"}
    without_queue = {k: v for k, v in full.items() if k != "queue_depth"}
    calls = [(without_temperature, GOOD)] * 5 + [(full, GOOD)] * 3 + [(without_queue, GOOD)] * 5
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        decisions = [controller.step(reading, metrics, 0.0) for reading, metrics in calls]
    first, second = told(record)
    assert re.match(r"reading has no value for input 'temperature' \(the mapping names 4 of the 5 inputs", first)
    assert "FALLBACK_ENVELOPE" in first and "name every input in the mapping" in first
    assert re.match(r"reading has no value for input 'queue_depth' ", second)
    assert decisions == silent_decisions(artifact_path, calls)
    assert [d.reason == Reason.FALLBACK_ENVELOPE for d in decisions] == [True] * 5 + [False] * 3 + [True] * 5


def test_a_reading_without_several_inputs_names_them_in_one_warning(artifact_path):
    controller = runtime.load(artifact_path)
    with pytest.warns(
        RuntimeInputWarning, match=r"^reading has no value for inputs 'mem_bw_util', 'l2_miss_rate' \(the "
    ):
        controller.step({"compute_util": 50.0, "temperature": 50.0, "queue_depth": 10.0}, GOOD)


def test_each_controller_tells_for_itself(artifact_path):
    first, second = runtime.load(artifact_path), runtime.load(artifact_path)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(5):
            first.step(READING)
            second.step(READING)
    assert len(told(record)) == 2


def test_the_normal_path_warns_nothing(artifact_path, tmp_path):
    controller = runtime.load(artifact_path)
    observed = runtime.load(artifact_path)
    observed.attach_counters(runtime.RuntimeCounters.for_machine(observed.machine))
    no_sla = runtime.load(artifact_path, sla=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(300):
            reading = [float(k % 100), 40.0, 12.5, 20.0 + k % 90, float(k % 64)]
            controller.step(reading, {"latency_ms": 30.0 if k % 40 == 0 else 4.0}, float(k))
            controller.step(dict(zip(INPUTS, reading)), GOOD)
            observed.step(reading, GOOD)
            no_sla.step(reading)  # no SLA monitor: no metric is needed
            controller.step([None, 40.0, 12.5, 71.0, 9.0], GOOD)  # a value not measured, said so


def test_the_observed_path_tells_too_and_points_at_the_caller(artifact_path, tmp_path):
    controller = runtime.load(artifact_path)
    runtime.open_audit(controller, tmp_path / "log")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(5):
            controller.step({"compute_util": 50.0, "mem_bw_util": 50.0, "l2_miss_rate": 5.0, "temperature": 50.0})
    messages = told(record)
    assert len(messages) == 2
    assert any("'queue_depth'" in m for m in messages) and any("'latency_ms'" in m for m in messages)


def test_a_warning_made_an_error_raises_every_such_cycle_before_anything_changes(artifact_path):
    controller = runtime.load(artifact_path)
    controller.step(READING, GOOD, 0.0)
    state, cycle = controller.state, controller._sla.cycle
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeInputWarning)
        for _ in range(3):
            with pytest.raises(RuntimeInputWarning, match="SLA metric 'latency_ms'"):
                controller.step(READING)
            with pytest.raises(RuntimeInputWarning, match="input 'temperature'"):
                controller.step({k: v for k, v in zip(INPUTS, READING) if k != "temperature"}, GOOD)
    assert controller.state == state and controller._sla.cycle == cycle
    assert controller.step(READING, GOOD, 0.0) == silent_decisions(artifact_path, [(READING, GOOD)] * 2)[1]
