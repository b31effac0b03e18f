"""A tiny certified machine built by hand, small enough to review its Verilog line by line.

Two inputs, one of them signed (its envelope starts below 0) with
fractional edges on its 2^-2 grid (the fixed-point path refuses edges off
the grid); 4 x 2 = 8 cells (a power
of two, so the cell output needs one bit more than the ROM address);
three tokens with codes that are not their indices; a forbidden token in
two cells; confirm 2, cooldown 3, two overridable tokens. Every proposal
is allowed in its cell, as certification guarantees.
"""

from certfsm.machine import Machine, MachineParams


def tiny_machine(**changes) -> Machine:
    fields = dict(
        names=("speed", "load"),
        edges=((-2.0, -0.5, 0.0, 1.25, 3.0), (0.0, 10.0, 20.0)),
        frac_bits=(2, 0),
        tokens=("HOLD", "FAST", "SLOW"),
        proposal=(0, 0, 2, 0, 1, 2, 1, 1),
        exact=(True, False, True, True, True, False, True, True),
        allowed=(0b111, 0b101, 0b111, 0b111, 0b011, 0b111, 0b011, 0b011),
        params=MachineParams(
            n_tokens=3,
            conservative=0,
            confirm_cycles=2,
            cooldown_cycles=3,
            overridable=frozenset({0, 2}),
            codes=(0, 5, 9),
            legal=frozenset({0, 1, 2}),
        ),
        artifact_sha256="0" * 64,
    )
    fields.update(changes)
    return Machine(**fields)
