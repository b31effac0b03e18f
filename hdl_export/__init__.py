"""Hardware export: the certified machine as one structural description, printed as synthesizable Verilog.

`hardware_of(machine, module_name)` describes a `certfsm.machine.Machine`
(decoded by `Machine.from_artifact`) as a `Hardware`: ports, comparator
banks, the table and mask ROMs, registers and the rule chain of
`certfsm.machine.step` (`_netlist.py` holds the node types, `_hardware.py`
builds them and states the port contract). `print_verilog(module)` and
`print_testbench` are the one Verilog printer (`_verilog.py`).

`export_verilog(artifact, out, check=...)` is `certfsm export-verilog`:
the module, a self-checking test bench whose vectors come from the Python
reference (`_vectors.py`: `Machine.cell_of_fixed` and `Machine.step`
behind the port contract's clocking), and with ``check`` the real tool
runs of `_checks.py` (Verilator lint, Icarus simulation, yosys generic and
iCE40 synthesis, nextpnr-ice40) and the formal equivalence, all recorded
in ``summary.json``. Before anything is built or written, `table_fit`
(`_targets.py`) says which FPGAs of `TARGETS` have the block RAM for the
table, and with ``check`` a table the iCE40 HX8K cannot hold is refused.

`prove_equivalence(machine, verilog_file)` (`_equivalence.py`) proves a
Verilog module equal to the certified machine for every register state
and every input: yosys writes the module's transition relation
(`_transition.py`), and Z3 decides four claims over one clock edge
(`_claims.py`: reset, hold, the binning and ROMs, the state machine
against `certfsm.fsm.StepEncoding`); `check_verilog` is `certfsm
check-verilog`.
"""

from __future__ import annotations

from ._checks import ICE40_DEVICE, Check, lint, place_and_route, simulate, synth_generic, synth_ice40, tool_versions
from ._c import print_c
from ._c_checks import cortex_m_size, misra_check
from ._c_export import CExport, export_c
from ._equivalence import Equivalence, QueryResult, check_verilog, equivalence_check, prove_equivalence
from ._export import DEFAULT_RANDOM_STEPS, Export, export_machine, export_verilog
from ._hardware import LATENCY, STATE_REGISTERS, Hardware, check_module_name, default_module_name, hardware_of
from ._netlist import Module
from ._transition import VerilogError
from ._vectors import Cycle, Layout, Reference, expected_layout, stimulus, stimulus_layout, write_vectors
from ._verilog import print_testbench, print_verilog

__all__ = [
    "DEFAULT_RANDOM_STEPS",
    "ICE40_DEVICE",
    "LATENCY",
    "STATE_REGISTERS",
    "Check",
    "Cycle",
    "Equivalence",
    "Export",
    "Hardware",
    "Layout",
    "Module",
    "Reference",
    "check_module_name",
    "cortex_m_size",
    "default_module_name",
    "expected_layout",
    "export_machine",
    "export_verilog",
    "hardware_of",
    "lint",
    "misra_check",
    "place_and_route",
    "print_testbench",
    "print_verilog",
    "simulate",
    "stimulus",
    "stimulus_layout",
    "synth_generic",
    "synth_ice40",
    "tool_versions",
    "write_vectors",
    "CExport",
    "QueryResult",
    "export_c",
    "print_c",
    "VerilogError",
    "check_verilog",
    "equivalence_check",
    "prove_equivalence",
]
