"""The monitor: hysteresis timing, the tokens filter, each statistic, missing metrics, and refused input."""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from certfsm import SpecError
from certfsm import SLA_STATISTICS
from certfsm import SlaPath, load_spec
from certfsm.examples import example_spec_path
import certfsm.sla
from certfsm.sla import SlaMonitor
from certfsm.sla._status import PathStatus, SlaStatus

TOKENS = ("KEEP", "FUSE_CONV", "INT4")


def path(**fields) -> SlaPath:
    base = dict(name="lat", metric="latency_ms", limit=10.0, window=4, max_violations=1, recovery_cycles=3)
    base.update(fields)
    return SlaPath(**base)


def run(monitor, values, token="INT4"):
    """The statuses of one update per value (a value may be a (value, token) pair)."""
    statuses = []
    for value in values:
        value, current = value if isinstance(value, tuple) else (value, token)
        statuses.append(monitor.update({"latency_ms": value}, current))
    return statuses


def oks(statuses) -> str:
    """The ok column as text: '.' ok, 'X' breached."""
    return "".join("." if s.ok else "X" for s in statuses)


# ---------------------------------------------------------------- hysteresis timing


def test_a_breach_holds_until_recovery_cycles_good_cycles_after_the_window_clears():
    monitor = SlaMonitor([path()])
    statuses = run(monitor, [1, 11, 12, 1, 1, 1, 1, 1, 1])
    lat = [s.paths[0] for s in statuses]
    # cycle:                   1  2  3  4  5  6  7  8  9
    assert [p.violation for p in lat] == [False, True, True, False, False, False, False, False, False]
    assert [p.violations for p in lat] == [0, 1, 2, 2, 2, 1, 0, 0, 0]
    assert oks(statuses) == "..XXXXX.."  # over in 3..5, good from 6: the 3rd good cycle (8) recovers
    assert [p.recovery_count for p in lat] == [0, 0, 0, 0, 0, 1, 2, 0, 0]
    assert [(p.breaches, p.recoveries) for p in lat][-1] == (1, 1)
    assert (statuses[2].breaches, statuses[-1].recoveries) == (1, 1)


def test_a_violation_during_recovery_starts_the_count_again():
    monitor = SlaMonitor([path(window=4, max_violations=1, recovery_cycles=3)])
    statuses = run(monitor, [11, 11, 1, 1, 1, 11, 1, 1, 1, 1])
    # over in 2..4; 5 is good (1); 6 is a violation within budget (resets); 7, 8, 9 good: healthy in 9
    assert oks(statuses) == ".XXXXXXX.."
    assert [s.paths[0].recovery_count for s in statuses] == [0, 0, 0, 0, 1, 0, 1, 2, 0, 0]


def test_recovery_cycles_zero_means_healthy_as_soon_as_the_window_is_within_budget():
    monitor = SlaMonitor([path(window=3, max_violations=1, recovery_cycles=0)])
    statuses = run(monitor, [11, 11, 1, 11, 1, 1])
    # windows: {11}, {11,11}: over, {11,11,1}: over, {11,1,11}: over, {1,11,1}: within, {11,1,1}
    assert oks(statuses) == ".XXX.."
    assert statuses[-1].paths[0].breaches == 1 and statuses[-1].paths[0].recoveries == 1


def test_the_first_violation_over_budget_breaches_in_its_own_cycle():
    monitor = SlaMonitor([path(window=1, max_violations=0, recovery_cycles=1)])
    assert oks(run(monitor, [1, 10, 10.5, 1, 11, 1])) == "..X.X."


def test_max_violations_at_window_never_breaches():
    monitor = SlaMonitor([path(window=2, max_violations=2)])
    assert oks(run(monitor, [None] * 5)) == "....."


def test_ok_needs_every_path_healthy():
    monitor = SlaMonitor(
        [
            path(name="a", window=1, max_violations=0, recovery_cycles=0),
            path(name="b", metric="queue", limit=5.0, window=1, max_violations=0, recovery_cycles=0),
        ]
    )
    cycles = [
        ({"latency_ms": 1, "queue": 1}, True),
        ({"latency_ms": 11, "queue": 1}, False),
        ({"latency_ms": 1, "queue": 6}, False),
        ({"latency_ms": 1, "queue": 5}, True),
    ]
    for metrics, ok in cycles:
        status = monitor.update(metrics, "KEEP")
        assert status.ok is ok is monitor.ok
    assert status.breached_paths == () and (status.breaches, status.recoveries) == (2, 2)


# ---------------------------------------------------------------- the tokens filter


def test_a_scoped_path_counts_only_its_tokens_and_recovers_during_the_fallback():
    monitor = SlaMonitor([path(tokens=("INT4",), window=3, max_violations=0, recovery_cycles=2)], tokens=TOKENS)
    statuses = run(
        monitor,
        [
            (50, "KEEP"),
            (None, "FUSE_CONV"),
            (30, "INT4"),
            (99, "KEEP"),
            (None, "KEEP"),
            (math.nan, "KEEP"),
            (50, "KEEP"),
            (5, "INT4"),
        ],
    )
    lat = [s.paths[0] for s in statuses]
    assert [p.applies for p in lat] == [False, False, True, False, False, False, False, True]
    assert [p.statistic for p in lat] == [None, None, 30.0, None, None, None, None, 5.0]
    assert [p.violation for p in lat] == [False, False, True, False, False, False, False, False]
    # over while cycle 3 is in the window (3..5); 6 and 7 are good: healthy again in 7
    assert oks(statuses) == "..XXXX.."


def test_an_unscoped_path_applies_to_every_token():
    monitor = SlaMonitor([path(window=1, max_violations=0, recovery_cycles=0)], tokens=TOKENS)
    assert oks(run(monitor, [(11, "KEEP"), (1, "FUSE_CONV"), (11, "INT4")])) == "X.X"


def test_from_spec_takes_the_paths_and_the_spec_tokens():
    spec = load_spec(example_spec_path("coadapt"))
    monitor = SlaMonitor.from_spec(spec)
    assert monitor.paths == spec.sla_paths and monitor.tokens == frozenset(spec.outputs)
    status = monitor.update({"latency_ms": 25.0}, "INT4")
    assert status.paths[0].name == "inference" and status.paths[0].violation and status.ok


# ---------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    "statistic, samples, expected",
    [
        ("value", [3, 12, 10], [3.0, 12.0, 10.0]),
        ("p50", [3, 12, 10, 11], [3.0, 3.0, 10.0, 10.0]),  # nearest rank: ceil(n / 2)-th smallest
        ("p95", [3, 12, 10, 1], [3.0, 12.0, 12.0, 12.0]),
        ("p99", [12, 3, 3, 3, 3], [12.0, 12.0, 12.0, 12.0, 3.0]),  # window 4: 12 leaves in cycle 5
        ("mean", [3, 12, 10, 11, 1], [3.0, 7.5, 25 / 3, 9.0, 8.5]),
    ],
)
def test_each_statistic_over_the_window(statistic, samples, expected):
    limit = 9.0
    monitor = SlaMonitor([path(statistic=statistic, limit=limit, window=4, max_violations=3)])
    lat = [s.paths[0] for s in run(monitor, samples)]
    assert [p.statistic for p in lat] == expected
    assert [p.violation for p in lat] == [value > limit for value in expected]


def test_windowed_statistics_skip_cycles_where_the_path_does_not_apply():
    monitor = SlaMonitor([path(statistic="mean", tokens=("INT4",), window=3, max_violations=2)], tokens=TOKENS)
    lat = [s.paths[0] for s in run(monitor, [(4, "INT4"), (100, "KEEP"), (8, "INT4"), (None, "KEEP"), (2, "INT4")])]
    assert [p.statistic for p in lat] == [4.0, None, 6.0, None, 5.0]  # the 4 of cycle 1 leaves in cycle 4


def test_a_statistic_equal_to_the_limit_is_within_the_sla():
    for statistic in SLA_STATISTICS:
        monitor = SlaMonitor([path(statistic=statistic, limit=10.0, window=2, max_violations=0)])
        assert not any(s.paths[0].violation for s in run(monitor, [10.0, 10, 10.0])), statistic


def test_the_mean_is_compared_exactly():
    above = math.nextafter(1.0, math.inf)
    monitor = SlaMonitor([path(statistic="mean", limit=1.0, window=3, max_violations=2)])
    last = run(monitor, [1.0, 1.0, above])[-1].paths[0]
    assert Fraction(1) < (2 + Fraction(above)) / 3
    assert last.statistic == 1.0 and last.violation  # rounded for the report, exact for the decision


@pytest.mark.parametrize(
    "metrics",
    [
        {},
        {"latency_ms": None},
        {"latency_ms": math.nan},
        {"latency_ms": math.inf},
        {"latency_ms": -math.inf},
        {"latency_ms": 10**400},
        None,
    ],
    ids=["absent", "None", "NaN", "inf", "-inf", "int-beyond-float64", "no-metrics"],
)
def test_a_missing_metric_is_a_violation(metrics):
    for statistic in SLA_STATISTICS:
        monitor = SlaMonitor([path(statistic=statistic, window=1, max_violations=0, recovery_cycles=0)])
        status = monitor.update(metrics, "INT4")
        assert status.paths[0].violation and not status.ok, statistic
        assert status.paths[0].statistic is None


def test_a_missing_metric_leaves_the_window_samples_as_they_were():
    monitor = SlaMonitor([path(statistic="p50", window=3, max_violations=2)])
    lat = [s.paths[0] for s in run(monitor, [4, None, 6])]
    assert [(p.statistic, p.violation) for p in lat] == [(4.0, False), (4.0, True), (4.0, False)]


def test_other_real_numbers_are_read_exactly_and_negative_zero_as_zero():
    fraction = Fraction(1, 3)
    monitor = SlaMonitor([path(statistic="p50", limit=1.0, window=2, max_violations=1)])
    first = monitor.update({"latency_ms": -0.0}, "KEEP").paths[0]
    assert first.statistic == 0.0 and math.copysign(1, first.statistic) == 1 and not first.violation
    assert monitor.update({"latency_ms": fraction, "unused": "text"}, "KEEP").paths[0].statistic == 0.0
    assert monitor.snapshot()["paths"][0]["samples"] == [0.0, "1/3"]  # the exact value, not float(1/3)
    assert "-0.0" not in json.dumps(monitor.snapshot())


# ---------------------------------------------------------------- status


def test_status_reports_every_path_and_serialises_to_json():
    monitor = SlaMonitor([path(name="a"), path(name="b", statistic="p95", tokens=("INT4",))], tokens=TOKENS)
    status = monitor.update({"latency_ms": 12.5}, "KEEP")
    assert isinstance(status, SlaStatus) and status.cycle == 1
    assert status.path("a") == PathStatus("a", True, 12.5, True, 1, False, 0, 0, 0)
    assert status.path("b") == PathStatus("b", False, None, False, 0, False, 0, 0, 0)
    with pytest.raises(KeyError, match=r"no SLA path named 'c' \(paths: a, b\)"):
        status.path("c")
    document = json.loads(json.dumps(status.to_json(), allow_nan=False))
    assert document == {
        "cycle": 1,
        "ok": True,
        "paths": [
            {
                "name": "a",
                "applies": True,
                "statistic": 12.5,
                "violation": True,
                "violations": 1,
                "breached": False,
                "recovery_count": 0,
                "breaches": 0,
                "recoveries": 0,
            },
            {
                "name": "b",
                "applies": False,
                "statistic": None,
                "violation": False,
                "violations": 0,
                "breached": False,
                "recovery_count": 0,
                "breaches": 0,
                "recoveries": 0,
            },
        ],
    }
    assert repr(monitor) == "SlaMonitor(a, b; cycle 1, ok)"


def test_a_monitor_without_paths_is_always_ok():
    monitor = SlaMonitor()
    assert monitor.ok and monitor.update(None, "anything").ok and monitor.cycle == 1


def test_the_statistics_are_the_spec_and_schema_ones(spec_schema):
    schema = spec_schema["$defs"]["sla_path"]["properties"]["statistic"]["enum"]
    assert SLA_STATISTICS == tuple(schema)


# ---------------------------------------------------------------- refused input


BAD_UPDATES = [
    (
        "metrics-not-a-mapping",
        ([("latency_ms", 1.0)], "INT4"),
        TypeError,
        r"^metrics=\[\('latency_ms', 1\.0\)\] is a list, not a mapping; give a dict from metric name to value$",
    ),
    (
        "metric-is-text",
        ({"latency_ms": "12"}, "INT4"),
        TypeError,
        r"^metrics\['latency_ms'\]='12' is a str, not a number; give a float, or None when the metric was not measured$",
    ),
    (
        "metric-is-bool",
        ({"latency_ms": True}, "INT4"),
        TypeError,
        r"^metrics\['latency_ms'\]=True is a bool, not a number; ",
    ),
    (
        "token-not-text",
        ({"latency_ms": 1.0}, 2),
        TypeError,
        r"^token=2 is a int, not a token name; give the name of the token$",
    ),
    (
        "token-unknown",
        ({"latency_ms": 1.0}, "INT8"),
        ValueError,
        r"^token='INT8' is not a token of this monitor \(known: FUSE_CONV, INT4, KEEP\); give the name of the token the metrics "
        r"were measured on$",
    ),
]


@pytest.mark.parametrize(
    "arguments, error, pattern", [case[1:] for case in BAD_UPDATES], ids=[c[0] for c in BAD_UPDATES]
)
def test_bad_update_is_refused_and_changes_nothing(arguments, error, pattern):
    monitor = SlaMonitor([path(window=2, max_violations=0, statistic="mean")], tokens=TOKENS)
    monitor.update({"latency_ms": 20.0}, "INT4")
    before = monitor.snapshot()
    with pytest.raises(error, match=pattern):
        monitor.update(*arguments)
    assert monitor.snapshot() == before and monitor.cycle == 1 and not monitor.ok


BAD_PATHS = [
    (
        "limit-nan",
        dict(limit=math.nan),
        r"^sla path 'lat' \(paths\[0\]\): limit=nan is not a finite number; "
        r"give the largest acceptable value of latency_ms$",
    ),
    ("limit-text", dict(limit="10"), r"^sla path 'lat' \(paths\[0\]\): limit='10' is not a finite number; "),
    ("window-zero", dict(window=0), r"^sla path 'lat' \(paths\[0\]\): window=0 is not an integer >= 1; fix the path$"),
    ("window-float", dict(window=4.0), r"^sla path 'lat' \(paths\[0\]\): window=4\.0 is not an integer >= 1; "),
    (
        "max-violations-negative",
        dict(max_violations=-1),
        r"^sla path 'lat' \(paths\[0\]\): max_violations=-1 is not an integer >= 0; fix the path$",
    ),
    (
        "recovery-bool",
        dict(recovery_cycles=True),
        r"^sla path 'lat' \(paths\[0\]\): recovery_cycles=True is not an integer >= 0; ",
    ),
    (
        "statistic",
        dict(statistic="p90"),
        r"^sla path 'lat' \(paths\[0\]\): statistic='p90' is not one of value, p50, p95, p99, mean; use one of those$",
    ),
    (
        "tokens-empty",
        dict(tokens=()),
        r"^sla path 'lat' \(paths\[0\]\): tokens=\(\) is not a non-empty list of token names; ",
    ),
    (
        "tokens-string",
        dict(tokens="INT4"),
        r"^sla path 'lat' \(paths\[0\]\): tokens='INT4' is not a non-empty list of token ",
    ),
    (
        "tokens-unknown",
        dict(tokens=("INT4", "INT8")),
        r"^sla path 'lat' \(paths\[0\]\): tokens\[1\]='INT8' is not a token of this monitor \(known: FUSE_CONV, INT4, KEEP\); "
        r"use one of those names$",
    ),
    (
        "metric-empty",
        dict(metric=""),
        r"^sla path 'lat' \(paths\[0\]\): metric='' is not a non-empty string; name the metric",
    ),
    ("name-missing", dict(name=None), r"^paths\[0\]: name=None is not a non-empty string; give the path a name$"),
]


@pytest.mark.parametrize("fields, pattern", [case[1:] for case in BAD_PATHS], ids=[case[0] for case in BAD_PATHS])
def test_bad_path_is_refused_with_a_pinned_message(fields, pattern):
    with pytest.raises(SpecError, match=pattern) as caught:
        SlaMonitor([path(**fields)], tokens=TOKENS)
    assert isinstance(caught.value, ValueError) and "\n" not in str(caught.value)


def test_repeated_path_names_are_refused():
    with pytest.raises(
        SpecError, match=r"^sla path 'lat' \(paths\[1\]\): name repeats paths\[0\]; give each path its own name$"
    ):
        SlaMonitor([path(), path(metric="other")])


def test_paths_need_no_known_token_set():
    monitor = SlaMonitor([path(tokens=("anything",), window=1, max_violations=0, recovery_cycles=0)])
    assert monitor.tokens is None
    assert not monitor.update({"latency_ms": 11}, "anything").ok and monitor.update({"latency_ms": 11}, "other").ok


# ---------------------------------------------------------------- import hygiene


def test_the_package_imports_only_the_standard_library():
    code = """
import sys
import certfsm
before = set(sys.modules)
import certfsm.sla
added = sorted(set(sys.modules) - before)
foreign = [m for m in added if not m.startswith(("certfsm.sla", "certfsm._sla_path", "certfsm._decimal"))
           and m.split(".")[0].lstrip("_") not in
           {name.lstrip("_") for name in sys.stdlib_module_names}]
assert not foreign, foreign
heavy = [m for m in sys.modules if m.startswith(("certfsm.verify", "certfsm.fsm", "certfsm._spec", "z3", "onnx",
                                                  "maraboupy", "jsonschema"))]
assert not heavy, heavy
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_module_imports_only_the_standard_library_and_the_error_classes():
    """Static, so it holds whatever else `import certfsm` loads: from the core only the errors, `SlaPath` with
    `SLA_STATISTICS`, and the
    exact reading of spec constants (`decimal_value`, `float_at_most`, whose module imports the standard library
    alone: checked here too)."""
    folder = Path(certfsm.sla.__file__).parent
    allowed = set(sys.stdlib_module_names)
    core = {name for name in certfsm.__all__ if name.endswith("Error")} | {
        "SlaPath",
        "SLA_STATISTICS",
        "decimal_value",
        "float_at_most",
    }
    decimal_home = Path(certfsm.__file__).parent / "_decimal.py"
    assert certfsm.decimal_value.__module__ == certfsm.float_at_most.__module__ == "certfsm._decimal"
    for node in ast.walk(ast.parse(decimal_home.read_text())):
        if isinstance(node, ast.Import | ast.ImportFrom) and getattr(node, "level", 0) == 0:
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module]
            assert all(m.split(".")[0] in sys.stdlib_module_names or m == "__future__" for m in modules), modules
    found = {}
    for module in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "certfsm":
                names = [f"certfsm.{alias.name}" for alias in node.names if alias.name not in core]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                if name not in allowed and name.split(".")[0] not in sys.stdlib_module_names:
                    found.setdefault(module.name, []).append(name)
    assert found == {}
