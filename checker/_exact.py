"""A z3 leaf, decided again by a query this checker builds itself, in exact rational arithmetic.

Soundness. The query states: a real x in the leaf's closed box (its exact
bounds, which contain the half-open leaf and every point of it inside the
property's box), the network applied to x with every weight the rational
that its float32 value denotes (read by this checker's own loader), and
every row of the disjunct (``a . y <= b``, ``<`` when strict) with the
certificate's exact constants. UNSAT means no point of the leaf reaches
the disjunct. Two kinds of facts are added to help z3, both true at every
point of the box, so they cannot turn a satisfiable query unsat: a ReLU
whose input this checker has bounded (`_arith`, sound) at or above 0 is
the identity there, at or below 0 is 0, and an unstable one's input lies
in its bounds. The recorded query file is not trusted: only its SHA-256
is compared with the certificate's, so that a report is the one written.
"""

from __future__ import annotations

import hashlib
from fractions import Fraction


def _exact(z3, value):
    value = Fraction(value)
    return z3.RealVal(f"{value.numerator}/{value.denominator}")


def z3_refutes(leaf, folder, ops, rows, box, lows, highs, seconds: float = 300.0) -> str:
    """'' when the leaf's query file is the one recorded and z3 answers unsat for the query built here (see the
    module docstring), else why not."""
    try:
        name, sha = str(leaf["z3"]["file"]), leaf["z3"]["sha256"]
        data = (folder / name).read_bytes()
    except (OSError, KeyError, TypeError):
        data, name, sha = b"", "?", "?"
    if hashlib.sha256(data).hexdigest() != sha:
        return f"its query file {name} is missing or changed"
    try:
        import z3
    except ImportError:
        return "a z3 leaf needs the z3-solver package (pip install z3-solver)"
    solver = z3.Solver()
    solver.set("timeout", max(1, int(seconds * 1000)))
    values = [[z3.Real(f"x{i}") for i in range(len(box[0]))]]
    for value, lo, hi in zip(values[0], *box):
        solver.add(_exact(z3, lo) <= value, value <= _exact(z3, hi))
    for index, (kind, reads, param) in enumerate(ops):
        given = values[reads[0]]
        if kind == "matmul":  # a zero weight adds no term; an empty sum is 0
            given = [z3.Sum([z3.RealVal(0)] + [_exact(z3, w) * v for w, v in zip(col, given) if w]) for col in param.T]
        elif kind in ("add", "mul", "div"):
            step = {"add": lambda v, c: v + c, "mul": lambda v, c: v * c, "div": lambda v, c: v / c}[kind]
            given = [step(v, _exact(z3, c)) for v, c in zip(given, param)]
        elif kind in ("neg", "sum"):
            given = [-v for v in given] if kind == "neg" else [a + b for a, b in zip(given, values[reads[1]])]
        elif kind == "pick":
            joined = [v for r in reads for v in values[r]]
            given = [joined[i] if i >= 0 else _exact(z3, c) for i, c in zip(*param)]
        else:
            named = []
            for j, value in enumerate(given):
                lo, hi = lows[reads[0]][j], highs[reads[0]][j]
                if lo >= 0.0 or hi <= 0.0:
                    named.append(value if lo >= 0.0 else z3.RealVal(0))
                    continue
                out = z3.Real(f"r{index}_{j}")
                solver.add(_exact(z3, lo) <= value, value <= _exact(z3, hi), out == z3.If(value > 0, value, 0))
                named.append(out)
            given = named
        values.append(given)
    values = values[-1]
    for row in rows:
        lhs = z3.Sum([_exact(z3, c) * y for c, y in zip(row["coefficients"], values)])
        solver.add(lhs < _exact(z3, row["rhs"]) if row["strict"] else lhs <= _exact(z3, row["rhs"]))
    answer = solver.check()
    return "" if answer == z3.unsat else f"z3 answers {answer} on the leaf's exact query"
