"""Hardware export: the certified machine as one structural description, printed as synthesizable Verilog.

`hardware_of(machine, module_name)` describes a `certfsm.machine.Machine`
(decoded by `Machine.from_artifact`) as a `Hardware`: ports, comparator
banks, the table and mask ROMs, registers and the rule chain of
`certfsm.machine.step` (`_netlist.py` holds the node types, `_hardware.py`
builds them and states the port contract, `_leaves.py` the leaf lookup of
a refined table, `_rule_chain.py` builds the deciding edge: the rule
chain and the registers it loads).
`print_verilog(module)` and `print_testbench` are the one Verilog printer
(`_verilog.py`).

`export_verilog(artifact, out, check=...)` is `certfsm export-verilog`:
the module, a self-checking test bench whose vectors come from the Python
reference (`_vectors.py`: `Machine.cell_of_fixed`, `Machine.leaf_of_fixed`
and `Machine.step_leaf` behind the port contract's clocking), and with ``check`` the real tool
runs of `_checks.py` (Verilator lint, Icarus simulation, yosys generic and
iCE40 synthesis, nextpnr-ice40; yosys `synth_ecp5` and nextpnr-ecp5 on the
smallest ECP5 that holds a module the iCE40 HX8K does not: `_ecp5.py`) and
the formal equivalence, all recorded in ``summary.json``. Before anything
is built or written, `table_fit` (`_targets.py`) says which FPGAs of
`TARGETS` have the block RAM for the table, and with ``check`` a table
none of them holds is refused.

`prove_equivalence(machine, verilog_file)` (`_equivalence.py`) proves a
Verilog module equal to the certified machine for every register state
and every input: yosys writes the module's transition relation
(`_transition.py`), and Z3 decides four claims over one clock edge
(`_claims.py`: reset, hold, the binning and ROMs, the state machine
against `certfsm.fsm.StepEncoding`; on a large refined table the
binning and ROMs claim in pieces, `_pieces.py`); `check_verilog` is
`certfsm check-verilog`.

`__all__` holds what other packages, the CLI, the bench scripts and the
README use (tests/test_house.py holds it to that), with `print_verilog`
beside `print_c`; the other names above are this package's own,
imported from their homes by its modules and its tests.
"""

from __future__ import annotations

from ._c import print_c
from ._c_checks import cortex_m_size, misra_check
from ._c_export import export_c
from ._equivalence import check_verilog
from ._export import DEFAULT_RANDOM_STEPS, export_verilog
from ._hardware import check_module_name, hardware_of
from ._verilog import print_verilog

__all__ = [
    "DEFAULT_RANDOM_STEPS",
    "check_module_name",
    "cortex_m_size",
    "export_verilog",
    "hardware_of",
    "misra_check",
    "print_verilog",
    "export_c",
    "print_c",
    "check_verilog",
]
