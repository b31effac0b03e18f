"""Z3 on an equivalence query, with the bit-vector values of its model.

`certfsm.verify.solve_text` hands a query text to Z3 but reads back only
integer and Boolean model values; a counterexample to a hardware claim
is bit vectors (bus values, register contents), hence this second, small
door. Z3 runs exactly as on the standard script a stranger re-runs (a
fresh context, the default solver): yosys's ``-stbv`` state makes the
claims about the ROM and comparators pure bit-vector queries, which Z3
bit-blasts.
"""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class Model:
    """The values of a model's constants by name: bit vectors and integers as Python ints, Booleans as 0/1."""

    values: dict[str, int]

    def __call__(self, name: str) -> int:
        return self.values.get(name, 0)


def solve(script: str, seconds: float) -> tuple[str, Model | None, str]:
    """(answer, model or None, reason): answer sat, unsat or unknown (with the reason), as Z3 returned it."""
    try:
        import z3
    except ImportError as error:
        return "unknown", None, f"z3 cannot be imported ({error}); pip install z3-solver"
    context = z3.Context()
    milliseconds = max(1, int(seconds * 1000))
    try:
        solver = z3.Solver(ctx=context)
        solver.set("timeout", milliseconds)
        solver.add(z3.parse_smt2_string(script, ctx=context))
        answer = solver.check()
    except z3.Z3Exception as error:
        return "unknown", None, f"z3 error: {' '.join(str(error).split())}"
    if answer == z3.unsat:
        return "unsat", None, ""
    if answer == z3.sat:
        return "sat", _values(z3, solver.model()), ""
    return "unknown", None, f"z3 answered unknown ({solver.reason_unknown()})"


def _values(z3, model) -> Model:
    values = {}
    for declaration in model.decls():
        if declaration.arity() != 0:
            continue
        value = model[declaration]
        if z3.is_bv_value(value) or z3.is_int_value(value):
            values[declaration.name()] = value.as_long()
        elif z3.is_true(value) or z3.is_false(value):
            values[declaration.name()] = int(z3.is_true(value))
    return Model(values)
