"""The hardware description and its Verilog text: golden output, refusals, and the facts the port contract states.

Regenerate the golden module on purpose with CERTFSM_REGEN_GOLDEN=1 and
review the diff: it is the whole hardware of a tiny machine.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from tiny_machine import tiny_machine

from certfsm import SpecError
from certfsm.hdl_export import check_module_name, hardware_of, print_verilog
from certfsm.hdl_export._hardware import LATENCY, STATE_REGISTERS
from certfsm.hdl_export._vectors import Cycle, Reference
from certfsm.machine import Reason

GOLDEN = Path(__file__).parent / "golden" / "certfsm_tiny.v"


def test_the_tiny_machine_prints_as_the_reviewed_golden_verilog():
    text = print_verilog(hardware_of(tiny_machine(), "certfsm_tiny", ("m/s", "%")).module)
    if os.environ.get("CERTFSM_REGEN_GOLDEN") == "1":
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), f"{GOLDEN} is missing; run with CERTFSM_REGEN_GOLDEN=1 to create it"
    assert text == GOLDEN.read_text(), "the Verilog changed; review it and regenerate with CERTFSM_REGEN_GOLDEN=1"


def test_every_rom_line_names_its_cell_its_bounds_status_and_token():
    machine = tiny_machine()
    text = print_verilog(hardware_of(machine, "certfsm_tiny").module)
    for cell in range(machine.n_cells):
        status = "exact" if machine.exact[cell] else "conservative"
        token = machine.tokens[machine.proposal[cell]]
        line = (
            f"4'd{cell}:    table_word = 2'd{machine.proposal[cell]};  // cell {cell}: "
            f"{machine.describe_cell(cell)}: {status} {token}\n"
        )
        assert line in text
        assert re.search(rf"4'd{cell}: +mask_word = 3'b{machine.allowed[cell]:03b};  // cell {cell}: allowed ", text)
    # past the table (an address no reading reaches) each ROM repeats cell 0's word, so it holds no other word
    assert f"default: table_word = 2'd{machine.proposal[0]};  // no cell: reading_cell is always below 8, " in text
    assert f"default: mask_word = 3'b{machine.allowed[0]:03b};  // no cell: " in text


def test_buses_are_signed_only_below_zero_and_hold_one_value_beyond_each_end():
    hw = hardware_of(tiny_machine(), "certfsm_tiny")
    speed, load = hw.banks
    assert (speed.signed, speed.low, speed.high, speed.thresholds) == (True, -8, 12, (-2, 0, 5))
    assert -(1 << (speed.bus.width - 1)) <= speed.low - 1 and speed.high + 1 < (1 << (speed.bus.width - 1))
    assert (load.signed, load.low, load.high, load.thresholds) == (False, 0, 20, (10,))
    assert load.high + 1 < (1 << load.bus.width)
    assert hw.cell_width == 4 and hw.no_cell == 15


@pytest.mark.parametrize(
    "name, message",
    [
        (
            "9lives",
            r"^module='9lives' is not a Verilog module name; give letters, digits and _ \(not first a digit, "
            r"not a keyword\), e\.g\. module='certfsm_controller'$",
        ),
        ("module", r"^module='module' is not a Verilog module name"),
        ("has-dash", r"^module='has-dash' is not a Verilog module name"),
    ],
)
def test_a_bad_module_name_is_refused_naming_the_parameter_and_the_fix(name, message):
    with pytest.raises(SpecError, match=message) as error:
        check_module_name(name)
    assert "--" not in str(error.value)


def test_hardware_of_names_a_bad_module_name_as_its_own_parameter():
    with pytest.raises(
        SpecError,
        match=r"^module_name='9lives' is not a Verilog module name; give letters, digits "
        r"and _ \(not first a digit, not a keyword\), e\.g\. "
        r"module_name='certfsm_controller'$",
    ) as error:
        hardware_of(tiny_machine(), "9lives")
    assert "--" not in str(error.value)


def test_a_machine_without_frac_bits_is_refused_naming_the_input_and_the_fix():
    machine = tiny_machine(frac_bits=(2, None))
    with pytest.raises(
        SpecError,
        match=r"^inputs\[1\] \(load\) has no frac_bits, so the machine has no fixed-point "
        r"path; add frac_bits \(0\.\.24\) to that input in the spec$",
    ):
        hardware_of(machine, "certfsm_tiny")


def test_an_edge_off_the_fixed_point_grid_is_refused_naming_it_and_the_grid_values_beside_it():
    machine = tiny_machine(
        edges=((-2.0, -0.5, 0.0, 1.25, 3.0), (0.25, 0.5)),
        frac_bits=(2, 0),
        proposal=(0,) * 4,
        exact=(True,) * 4,
        allowed=(7,) * 4,
    )
    with pytest.raises(
        SpecError,
        match=r"^inputs\[1\] \(load\): edges\[0\]=0\.25 is not a multiple of 2\^-0 \(the "
        r"nearest are 0\.0 and 1\.0\), so a reading rounded to the fixed-point grid "
        r"could change cell; move the edge onto the grid or raise frac_bits$",
    ):
        hardware_of(machine, "certfsm_tiny")


@pytest.mark.parametrize(
    "names, verilog", [(("a-b", "a_b"), r"\['a_b', 'a_b'\]"), (("a", "a_bin"), r"\['a', 'a_bin'\]")]
)
def test_inputs_whose_verilog_names_collide_are_refused(names, verilog):
    with pytest.raises(
        SpecError,
        match=rf"^inputs \[.*\] give the Verilog names {verilog}, whose signals \(NAME, "
        r"NAME_bin, NAME_in_envelope\) repeat; rename the inputs in the spec",
    ):
        hardware_of(tiny_machine(names=names), "certfsm_tiny")


def test_inputs_named_like_a_port_an_internal_signal_or_a_keyword_get_a_prefix():
    hw = hardware_of(tiny_machine(names=("count", "wire")), "certfsm_tiny")
    assert [bank.bus.name for bank in hw.banks] == ["in_count", "in_wire"]


def test_the_reference_shows_a_decision_latency_edges_after_its_reading_and_holds_outputs_meanwhile():
    machine = tiny_machine()
    hw = hardware_of(machine, "certfsm_tiny")
    reference = Reference(hw)
    reset = Cycle(True, False, (0, 0))
    outside = Cycle(False, True, (13, 0))
    idle = Cycle(False, False, (0, 0))
    seen = [reference.edge(c) for c in (reset, outside, idle, idle)]
    assert LATENCY == 2
    assert seen[1][0] == 0 and seen[2][:4] == (1, 0, int(Reason.FALLBACK_ENVELOPE), hw.no_cell)
    assert seen[3][0] == 0 and seen[3][1:4] == seen[2][1:4]


def test_state_registers_and_machine_states_map_both_ways():
    from certfsm.machine import NO_CANDIDATE, State

    hw = hardware_of(tiny_machine(), "certfsm_tiny")
    for state in (State(0), State(1, 2, 1, 3), State(2, NO_CANDIDATE, 0, 1)):
        registers = hw.register_values(state)
        assert tuple(registers) == STATE_REGISTERS and hw.state_of(registers) == state
    assert hw.register_values(State(1)) == {
        "current": 1,
        "candidate_valid": 0,
        "candidate": 0,
        "count": 0,
        "cooldown": 0,
    }
