"""Hardware export: the certified machine as one structural description, printed as synthesizable Verilog.

`hardware_of(machine, module_name)` describes a `certfsm.machine.Machine`
(decoded by `Machine.from_artifact`) as a `Hardware`: ports, comparator
banks, the table and mask ROMs, registers and the rule chain of
`certfsm.machine.step` (`_netlist.py` holds the node types, `_hardware.py`
builds them and states the port contract). `print_verilog(module)` is the
one Verilog printer.
"""

from __future__ import annotations

from ._hardware import LATENCY, STATE_REGISTERS, Hardware, check_module_name, default_module_name, hardware_of
from ._netlist import Module
from ._verilog import print_verilog

__all__ = ["LATENCY", "STATE_REGISTERS", "Hardware", "Module", "check_module_name", "default_module_name",
           "hardware_of", "print_verilog"]
