"""Probes: the sample type, the Linux probe (on this machine and on a crafted /proc and /sys), the CSV trace probe, and stdlib-only imports."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from certfsm import ProbeError
from certfsm.runtime._probes import STANDARD_QUANTITIES, HardwareProbe, ProbeSample, cache_miss_quantity, percent
from certfsm.runtime._probes_linux import LinuxProbe
from certfsm.runtime._probes_trace import TraceProbe

EXAMPLE_INPUTS = ("compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth")


# ---------------------------------------------------------------- the sample


def test_sample_holds_floats_read_only_and_is_frozen():
    sample = ProbeSample(3, {"compute_util": 40, "temperature": None, "l2_miss_rate": 7.5}, {"latency_ms": 12})
    assert sample.timestamp == 3.0 and sample.compute_util == 40.0 and type(sample.compute_util) is float
    assert sample.temperature is None and sample.queue_depth is None  # reported missing, and absent
    assert sample.cache_miss_rate(2) == 7.5 and sample.cache_miss_rate(3) is None
    assert sample.metrics == {"latency_ms": 12.0}
    with pytest.raises(TypeError, match=r"^a ProbeSample mapping is read-only"):
        sample.values["compute_util"] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.timestamp = 4.0
    assert dataclasses.replace(sample, timestamp=5).timestamp == 5.0


def test_sample_keeps_nan_and_inf_as_measured():
    sample = ProbeSample(0.0, {"a": math.nan, "b": -math.inf})
    assert math.isnan(sample.get("a")) and sample.get("b") == -math.inf


@pytest.mark.parametrize(
    "args, pattern",
    [
        (
            (math.nan,),
            r"^ProbeSample timestamp=nan is not a finite number; give seconds on a monotonic clock such as time\.monotonic\(\)$",
        ),
        (("1.0",), r"^ProbeSample timestamp='1\.0' is not a finite number"),
        (
            (0.0, {"temperature": "hot"}),
            r"^ProbeSample values\['temperature'\]='hot' is not a number; give a real number or None \(missing\)$",
        ),
        ((0.0, {}, {"latency_ms": True}), r"^ProbeSample metrics\['latency_ms'\]=True is not a number"),
        ((0.0, {1: 2.0}), r"^ProbeSample values: name 1 is not a string; name each quantity with a string$"),
    ],
)
def test_sample_refuses_what_is_not_a_measurement(args, pattern):
    with pytest.raises(TypeError, match=pattern):
        ProbeSample(*args)


def test_the_example_inputs_are_standard_quantities():
    """So the example runs with the default calibration: each input reads the quantity of its own name."""
    assert set(EXAMPLE_INPUTS) <= STANDARD_QUANTITIES
    assert cache_miss_quantity(2) == "l2_miss_rate"


def test_percent_is_missing_without_a_positive_whole():
    assert percent(1.0, 4.0) == 25.0
    assert percent(None, 4.0) is None and percent(1.0, None) is None and percent(1.0, 0.0) is None


def test_hardware_probe_is_abstract():
    with pytest.raises(TypeError):
        HardwareProbe()


# ---------------------------------------------------------------- Linux probe on this machine


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and /sys of a Linux machine")
def test_linux_probe_on_this_machine_gives_plausible_values():
    with LinuxProbe() as probe:
        time.sleep(0.05)  # a few clock ticks on every CPU since the probe read the counters
        first = probe.sample()
        time.sleep(0.05)
        second = probe.sample()
    assert 0.0 <= first.compute_util <= 100.0
    assert probe.quantities == STANDARD_QUANTITIES and set(second.values) == STANDARD_QUANTITIES
    assert second.timestamp > first.timestamp
    assert 0.0 <= second.compute_util <= 100.0
    total, used = second.get("mem_total"), second.get("mem_used")
    assert total > 64 * 2**20 and 0 < used <= total and 0 < second.get("mem_util") <= 100
    assert second.queue_depth >= 1, "the probing thread itself is running"
    assert all(second.cache_miss_rate(level) is None for level in (1, 2, 3)), "no /proc or /sys source of cache misses"
    zones = list(Path("/sys/class/thermal").glob("thermal_zone*/temp"))
    readable = [z for z in zones if os.access(z, os.R_OK)]
    if not readable:
        assert second.temperature is None
    elif second.temperature is not None:
        assert -40 < second.temperature < 150
    if not Path("/sys/fs/resctrl/mon_data").exists():
        assert second.mem_bw_used is None and second.get("mem_bw_util") is None


# ---------------------------------------------------------------- Linux probe on a crafted root


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def stat_text(user, system, idle, iowait=0, running=3):
    return (
        f"cpu  {user} 0 {system} {idle} {iowait} 0 0 0 0 0\ncpu0 {user} 0 {system} {idle} {iowait} 0 0 0 0 0\n"
        f"intr 1 2 3\nctxt 100\nbtime 1700000000\nprocesses 500\nprocs_running {running}\nprocs_blocked 0\n"
    )


@pytest.fixture
def fake_root(tmp_path):
    write(tmp_path, "proc/stat", stat_text(100, 50, 800, 50))
    write(tmp_path, "proc/meminfo", "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    250 kB\n")
    write(tmp_path, "sys/class/thermal/thermal_zone0/temp", "45000\n")
    write(tmp_path, "sys/class/thermal/thermal_zone1/temp", "71500\n")
    write(tmp_path, "sys/class/thermal/thermal_zone2/temp", "not a number\n")  # a broken sensor is skipped
    return tmp_path


def test_linux_probe_on_a_crafted_root(fake_root):
    probe = LinuxProbe(fake_root, mem_bw_peak=1000.0)
    first = probe.sample(now=10.0)
    assert first.timestamp == 10.0 and first.compute_util is None, "no tick since the probe was built"
    assert first.queue_depth == 3.0
    assert (first.get("mem_total"), first.get("mem_used"), first.get("mem_util")) == (1024000.0, 768000.0, 75.0)
    assert first.temperature == 71.5, "the hottest zone"
    assert first.mem_bw_used is None and first.mem_bw_peak == 1000.0 and first.get("mem_bw_util") is None
    # 200 more ticks: 60 busy (user 40, system 20), 140 idle or waiting on I/O.
    write(fake_root, "proc/stat", stat_text(140, 70, 900, 90, running=7))
    second = probe.sample(now=11.0)
    assert second.compute_util == pytest.approx(30.0) and second.queue_depth == 7.0


def test_cpu_utilisation_repeats_when_no_tick_passed_and_restarts_when_counters_go_back(fake_root):
    probe = LinuxProbe(fake_root)
    write(fake_root, "proc/stat", stat_text(200, 50, 800, 50))
    assert probe.sample(now=1.0).compute_util == 100.0, "measured since the probe was built"
    assert probe.sample(now=3.0).compute_util == 100.0, "no tick passed: the machine has not moved"
    write(fake_root, "proc/stat", stat_text(10, 10, 10, 10))
    assert probe.sample(now=4.0).compute_util is None, "counters went back (a reset): no interval to measure"
    write(fake_root, "proc/stat", stat_text(10, 10, 30, 10))
    assert probe.sample(now=5.0).compute_util == 0.0


def test_memory_bandwidth_from_resctrl_as_a_rate(fake_root):
    for domain, count in (("mon_L3_00", 1000), ("mon_L3_01", 500)):
        write(fake_root, f"sys/fs/resctrl/mon_data/{domain}/mbm_total_bytes", f"{count}\n")
    probe = LinuxProbe(fake_root, mem_bw_peak=4000.0)
    assert probe.sample(now=1.0).mem_bw_used is None
    write(fake_root, "sys/fs/resctrl/mon_data/mon_L3_01/mbm_total_bytes", "2500\n")
    sample = probe.sample(now=1.5)
    assert sample.mem_bw_used == 4000.0 and sample.get("mem_bw_util") == 100.0
    write(fake_root, "sys/fs/resctrl/mon_data/mon_L3_01/mbm_total_bytes", "Unavailable\n")
    assert probe.sample(now=2.0).mem_bw_used is None


@pytest.mark.parametrize("peak", [0, -1.0, math.inf, math.nan, "1e9", True])
def test_a_bad_peak_bandwidth_is_refused_when_the_probe_is_built(peak):
    with pytest.raises(
        ProbeError,
        match=r"^LinuxProbe: mem_bw_peak=.* is not a positive number of bytes/s; give "
        r"the memory system's peak bandwidth from its data sheet, or None$",
    ):
        LinuxProbe(mem_bw_peak=peak)


def test_linux_probe_reports_missing_for_missing_files(tmp_path):
    sample = LinuxProbe(tmp_path / "nothing-here").sample(now=0.0)
    assert set(sample.values) == STANDARD_QUANTITIES
    assert all(value is None for value in sample.values.values())


@pytest.mark.parametrize(
    "stat, meminfo",
    [
        ("", ""),
        ("cpu\n", "MemTotal: lots kB\n"),
        ("cpu  a b c d\nprocs_running x\n", "MemTotal:\nMemAvailable 5 kB\n"),
        ("intr 1\ncpu 1 2 3 4 5 6 7 8\n", "\0\0\0"),
        ("cpu 1 2 3\n", "MemAvailable: 10 kB\n"),
    ],
)
def test_linux_probe_reports_missing_for_files_it_cannot_parse(tmp_path, stat, meminfo):
    write(tmp_path, "proc/stat", stat)
    write(tmp_path, "proc/meminfo", meminfo)
    write(tmp_path, "sys/class/thermal/thermal_zone0/temp", "")
    probe = LinuxProbe(tmp_path)
    for now in (0.0, 1.0):
        sample = probe.sample(now=now)
    assert sample.compute_util is None and sample.queue_depth is None and sample.temperature is None
    assert sample.get("mem_total") is None and sample.get("mem_used") is None


def test_linux_probe_survives_a_folder_where_a_file_should_be(tmp_path):
    (tmp_path / "proc" / "stat").mkdir(parents=True)
    (tmp_path / "sys/class/thermal/thermal_zone0/temp").mkdir(parents=True)
    assert LinuxProbe(tmp_path).sample(now=0.0).temperature is None


# ---------------------------------------------------------------- trace probe


def write_trace(tmp_path, text, name="trace.csv"):
    (tmp_path / name).write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return str(tmp_path / name)


def test_trace_replays_rows_with_missing_cells_and_metrics(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_trace(
        tmp_path,
        """
        temperature,queue_depth,latency_ms,compute_util,mem_bw_util,l2_miss_rate
        60,3,12.5,40,50,10
        nan, 70 ,,,1e3,-5

        inf,-inf,NaN,0,0,0
    """,
    )
    with TraceProbe("trace.csv", EXAMPLE_INPUTS) as probe:
        assert probe.quantities == frozenset(EXAMPLE_INPUTS) and probe.metric_names == ("latency_ms",)
        first = probe.sample(now=1.0)
        assert first.timestamp == 1.0
        assert first.values == {
            "temperature": 60.0,
            "queue_depth": 3.0,
            "compute_util": 40.0,
            "mem_bw_util": 50.0,
            "l2_miss_rate": 10.0,
        }
        assert first.metrics == {"latency_ms": 12.5}
        second = probe.sample(now=2.0)
        assert math.isnan(second.temperature) and second.queue_depth == 70.0 and second.compute_util is None
        assert second.get("mem_bw_util") == 1000.0 and second.cache_miss_rate(2) == -5.0, "out of envelope is kept"
        assert second.metrics == {"latency_ms": None}
        third = probe.sample(now=3.0)  # the blank line is skipped
        assert (
            third.temperature == math.inf and third.queue_depth == -math.inf and math.isnan(third.metrics["latency_ms"])
        )
        with pytest.raises(EOFError):
            probe.sample()
        with pytest.raises(EOFError):
            probe.sample()


def test_trace_is_iterable_and_reads_a_bom(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffa,b\n1,2\n3,4\n".encode("utf-8"))
    samples = list(TraceProbe(path, ["b", "a"]))
    assert [(s.get("a"), s.get("b")) for s in samples] == [(1.0, 2.0), (3.0, 4.0)]
    assert all(s.metrics == {} for s in samples) and samples[0].timestamp <= samples[1].timestamp


BAD_TRACES = [
    (
        "missing-column",
        "compute_util,mem_bw_util,l2_miss_rate,queue_depth,latency_ms\n1,2,3,4,5\n",
        r"^trace\.csv:1: the header has no column 'temperature' \(it has 'compute_util', 'mem_bw_util', 'l2_miss_rate', "
        r"'queue_depth', 'latency_ms'\); add a temperature column, with empty or nan cells where it was not measured$",
    ),
    (
        "repeated-column",
        "compute_util,mem_bw_util,l2_miss_rate,temperature,queue_depth,mem_bw_util\n",
        r"^trace\.csv:1: column 'mem_bw_util' appears twice in the header \(columns 2 and 6\); keep one$",
    ),
    (
        "empty",
        "",
        r"^trace\.csv: the trace is empty; write a header line naming the columns \(compute_util, "
        r"mem_bw_util, l2_miss_rate, temperature, queue_depth\) and one row per reading$",
    ),
    (
        "non-numeric",
        "compute_util,mem_bw_util,l2_miss_rate,temperature,queue_depth\n1,2,3,4,5\n1,2,3,hot,5\n",
        r"^trace\.csv:3: column 4 \(temperature\) = 'hot' is not a number; write a decimal number, nan, or leave the "
        r"cell empty where nothing was measured$",
    ),
    (
        "non-numeric-metric",
        "compute_util,mem_bw_util,l2_miss_rate,temperature,queue_depth,latency_ms\n1,2,3,4,5,12ms\n",
        r"^trace\.csv:2: column 6 \(latency_ms\) = '12ms' is not a number;",
    ),
    (
        "short-row",
        "compute_util,mem_bw_util,l2_miss_rate,temperature,queue_depth\n1,2,3,4,5\n\n1,2,3,4\n",
        r"^trace\.csv:4: 4 cells, expected 5 \(one per header column: compute_util, mem_bw_util, l2_miss_rate, "
        r"temperature, queue_depth\); fix the row \(an empty cell still needs its comma\)$",
    ),
    (
        "long-row",
        "compute_util,mem_bw_util,l2_miss_rate,temperature,queue_depth\n1,2,3,4,5,6\n",
        r"^trace\.csv:2: 6 cells, expected 5 ",
    ),
    (
        "not-utf8",
        b"compute_util,mem_bw_util,l2_miss_rate,temperature,queue_depth\n1,2,3,4,\xff\n",
        r"^trace\.csv:2: byte 9 of the line is not UTF-8; save the trace as UTF-8 CSV$",
    ),
]


@pytest.mark.parametrize("content, pattern", [case[1:] for case in BAD_TRACES], ids=[case[0] for case in BAD_TRACES])
def test_malformed_trace_is_one_line_naming_file_line_and_column(tmp_path, monkeypatch, content, pattern):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "trace.csv").write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(ProbeError, match=pattern) as caught:
        with TraceProbe("trace.csv", EXAMPLE_INPUTS) as probe:
            list(probe)
    assert "\n" not in str(caught.value) and isinstance(caught.value, ValueError)


def test_missing_trace_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        ProbeError,
        match=r"^absent\.csv: cannot read the trace \(No such file or directory\); "
        r"give the path of a readable CSV file$",
    ):
        TraceProbe("absent.csv", EXAMPLE_INPUTS)


# ---------------------------------------------------------------- standard library only


def test_probe_modules_import_with_the_standard_library_alone():
    """The runtime's scalar path runs on targets without numpy: load these modules with numpy blocked.

    `import certfsm` loads only the error classes (the rest of the core on
    first use), so the package imports as it is.
    """
    script = textwrap.dedent(f"""
        import sys
        for blocked in ("numpy", "jsonschema", "onnx", "onnxruntime", "maraboupy", "z3", "matplotlib"):
            sys.modules[blocked] = None
        from certfsm.runtime import _blob, _calibration, _probes, _probes_linux, _probes_trace
        probe = _probes_linux.LinuxProbe()
        probe.sample()
        reading = _calibration.Calibration.identity({EXAMPLE_INPUTS!r}).reading(probe.sample())
        print(len(reading))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "5"


# ---------------------------------------------------------------- the pieces together


def test_trace_calibration_and_blob_compose_for_the_example(tmp_path):
    """A trace of raw register values (temperature in millidegrees), calibrated, carried in blobs, decoded."""
    from certfsm import load_spec
    from certfsm.examples import example_spec_path
    from certfsm.runtime._blob import BlobLayout
    from certfsm.runtime._calibration import Calibration

    spec = load_spec(example_spec_path("coadapt"))
    names = [item.name for item in spec.inputs]
    trace = write_trace(
        tmp_path,
        """
        compute_util,mem_bw_util,l2_miss_rate,temperature,queue_depth,latency_ms
        40,50,10,61000,3,12.5
        90,,nan,87250,60,30
    """,
    )
    (tmp_path / "cal.json").write_text('{"certfsm_calibration": 1, "inputs": {"temperature": {"scale": 0.001}}}')
    calibration = Calibration.load(tmp_path / "cal.json", names)
    layout = BlobLayout.for_inputs(spec.inputs)
    with TraceProbe(trace, names) as probe:
        calibration.check_probe(probe)
        readings = [calibration.reading(sample) for sample in probe]
    assert readings[0] == (40.0, 50.0, 10.0, 61.0, 3.0)
    decoded = [layout.decode(layout.encode(reading)) for reading in readings]
    assert decoded[0] == readings[0]
    assert decoded[1][0] == 90.0 and decoded[1][1] is None and math.isnan(decoded[1][2])
    assert decoded[1][3:] == (87.25, 60.0)
