"""VNN-LIB property files (the VNN-COMP fragment) in, VNN-COMP result text out.

A VNN-LIB file states the *unsafe* set: an input box over ``X_i`` and
linear constraints over the outputs ``Y_j``; the property is violated
exactly when some input in the box reaches the unsafe outputs. The
supported fragment, which covers every VNN-COMP benchmark of this kind:

- ``; comments``, ``(declare-const X_i Real)`` and ``(declare-const Y_j Real)``
  (declared before use, indices 0..n-1 without gaps);
- ``(assert F)``; several asserts are a conjunction. ``F`` is built from
  ``and``, ``or`` and comparisons ``<=``, ``>=``, ``<``, ``>`` (chains such
  as ``(<= a b c)`` mean ``a <= b`` and ``b <= c``);
- terms are linear: numbers, variables, ``(+ ...)``, ``(- a)``, ``(- a b ...)``
  and ``(* ...)`` with at most one non-constant factor;
- a comparison over inputs bounds one variable (``(<= X_i c)``, ``(>= c X_i)``,
  ``(<= (- X_i) c)`` ...); a comparison over outputs is any linear constraint;
  no comparison mixes the two.

Constants are read exactly (docs/semantics.md, "Decimal constants" and
"Strict atoms"): every number is the exact decimal written (``0.1`` is
1/10), input bounds and output right-hand sides stay rationals in the
property IR (which rounds them in the sound direction for numeric
engines), and strict comparisons stay strict (`Conjunction.strict`,
`Property.open_lower`/`open_upper`). Coefficients of an output row that
no float64 holds exactly (``(* 0.1 Y_0)``) are cleared by scaling the
row with the common denominator, which changes no point of the set.
Equality is rejected rather than guessed.

Any file, however mangled, gets an answer in bounded time: a property or
one VnnlibError line. So the limits are checked *before* the work they
bound: nesting depth while reading parentheses (the readers recurse),
digits and exponent of a number before its exact Fraction is built
(``1e-999999999`` would take forever), the size of every exact value as
terms are combined, and the float64 range wherever a value becomes a
float (an input bound, an output coefficient or right-hand side).

The formula is put in disjunctive normal form. Disjuncts that share an
input box become one `Property` whose unsafe set is their disjunction;
different boxes (VNN-LIB property 6 style, ``(or (and <box> <outputs>)
...)``) give one `Property` each: the file's property is violated if any
of them is, and holds only if all of them hold.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from certfsm import VnnlibError

from ._exact import plain_decimal
from ._property import Conjunction, Property

_TOKEN = re.compile(r"\s+|;[^\n]*|[()]|[^\s();]+")
_VARIABLE = re.compile(r"^([XY])_(0|[1-9][0-9]{0,8})$")
_NUMBER = re.compile(r"^[+-]?(?P<mantissa>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE](?P<exponent>[+-]?[0-9]+))?$")
_COMPARISONS = ("<=", ">=", "<", ">")
_MAX_DISJUNCTS = 100_000
# Constraints summed over the disjuncts of the expanded formula: (and (or a b) ...) doubles it per (or,
# so a 600-byte file could ask for millions; building 200 000 takes about two seconds.
_MAX_DNF_SIZE = 200_000
# VNN-COMP files nest about 6 levels; the readers recurse (up to 2 frames a level) below Python's 1000.
_MAX_DEPTH = 100
# The exact decimal of every float64 has at most 1075 digits (the smallest subnormal written out).
_MAX_DIGITS = 1100
# Decimal exponents beyond float64's range (about 1e-324..1.8e308), with room for digits that shift it back.
_MAX_EXPONENT = 1100
# Bits of numerator plus denominator of any exact value: one number needs at most about 11 000,
# a product of two twice that.
_MAX_BITS = 32_768
_LARGEST = Fraction(np.finfo(np.float64).max)
_LARGEST_EXACT_INTEGER = 2**53
_VNNCOMP_WORDS = {
    "proved": "unsat",
    "unsat": "unsat",
    "violated": "sat",
    "sat": "sat",
    "unknown": "unknown",
    "timeout": "timeout",
}


def parse_vnnlib(path: str | os.PathLike, n_inputs: int | None = None, n_outputs: int | None = None) -> list[Property]:
    """The properties of one VNN-LIB file: one per distinct input box, in order of appearance.

    `n_inputs` / `n_outputs`, when given, must match the declared variables
    (the network the file will be checked against). Each property is named
    after the file stem, with ``#k`` (k from 0) when the file has several
    input boxes, and carries ``{"vnnlib": str(path)}`` (plus ``"box": k``)
    as metadata. Raises VnnlibError naming the file and line.
    """
    where = str(path)
    text = _read_text(path, where)
    reader = _Reader(where, n_inputs, n_outputs)
    for command in _read_sexprs(text, where):
        reader.command(command)
    return reader.properties(Path(path).stem)


def format_vnncomp_result(
    verdict: str, counterexample: np.ndarray | None = None, outputs: np.ndarray | None = None
) -> str:
    """The VNN-COMP result text (no trailing newline) for a certfsm or VNN-COMP verdict.

    ``proved``/``unsat`` -> "unsat"; ``unknown`` -> "unknown"; ``timeout`` ->
    "timeout"; ``violated``/``sat`` -> "sat" followed by the witness
    ``((X_0 v)\\n (X_1 v)\\n ... (Y_0 v)\\n ...)`` with every value written as
    the exact decimal of its float64 (`plain_decimal`): the printed point is
    the checked point, read exactly or as a float64.
    """
    word = _VNNCOMP_WORDS.get(verdict)
    if word is None:
        raise ValueError(f"verdict={verdict!r} is not one of {sorted(_VNNCOMP_WORDS)}")
    if word != "sat":
        if counterexample is not None or outputs is not None:
            raise ValueError(
                f"verdict={verdict!r} carries no counterexample; pass values only with a violated/sat verdict"
            )
        return word
    if counterexample is None or outputs is None:
        raise ValueError(f"verdict={verdict!r} needs both the counterexample and the outputs")
    inputs = np.asarray(counterexample, dtype=np.float64).reshape(-1)
    scores = np.asarray(outputs, dtype=np.float64).reshape(-1)
    if not (np.all(np.isfinite(inputs)) and np.all(np.isfinite(scores))):
        raise ValueError("the counterexample and outputs must be finite to be written as a VNN-COMP witness")
    entries = [f"(X_{i} {plain_decimal(v)})" for i, v in enumerate(inputs)]
    entries += [f"(Y_{j} {plain_decimal(v)})" for j, v in enumerate(scores)]
    return "sat\n(" + "\n ".join(entries) + ")"


# --- s-expressions -----------------------------------------------------------


@dataclass(frozen=True)
class _Atom:
    text: str
    line: int


@dataclass(frozen=True)
class _List:
    items: tuple
    line: int  # the line of the opening parenthesis

    @property
    def head(self) -> str | None:
        return self.items[0].text if self.items and isinstance(self.items[0], _Atom) else None


def _render(expr) -> str:
    if isinstance(expr, _Atom):
        return expr.text
    return "(" + " ".join(_render(item) for item in expr.items) + ")"


def _shown(expr, width: int = 80) -> str:
    """`expr` as written, cut to `width` characters: enough to find it in a message that stays one short line."""
    text = expr if isinstance(expr, str) else _render(expr)
    return text if len(text) <= width else f"{text[: width - 3]}..."


def _fail(where: str, line: int, message: str) -> VnnlibError:
    return VnnlibError(f"{where}:{line}: {message}")


def _read_text(path, where: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise VnnlibError(f"{where}: no such file; give the path of a .vnnlib property file") from None
    except UnicodeDecodeError as error:
        raise VnnlibError(f"{where}: is not UTF-8 text (byte {error.start}); give a .vnnlib text file") from None
    except OSError as error:
        raise VnnlibError(f"{where}: cannot be read ({error.strerror}); check the path and its permissions") from None


def _read_sexprs(text: str, where: str) -> list:
    """Top-level s-expressions with line numbers; comments run from ';' to the end of the line."""
    stack: list[list] = [[]]
    open_lines: list[int] = []
    line = 1
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token[0].isspace():
            line += token.count("\n")
        elif token[0] == ";":
            continue
        elif token == "(":
            if len(open_lines) == _MAX_DEPTH:
                message = (
                    f"nesting deeper than {_MAX_DEPTH} levels; VNN-LIB properties nest a few levels, "
                    "flatten the formula or split the file"
                )
                raise _fail(where, line, message)
            stack.append([])
            open_lines.append(line)
        elif token == ")":
            if not open_lines:
                message = "unbalanced parentheses: ')' closes nothing; remove it or add the matching '('"
                raise _fail(where, line, message)
            items = stack.pop()
            stack[-1].append(_List(tuple(items), open_lines.pop()))
        else:
            stack[-1].append(_Atom(token, line))
    if open_lines:
        raise _fail(where, open_lines[0], "unbalanced parentheses: this '(' is never closed; add the missing ')'")
    return stack[0]


# --- formulas ----------------------------------------------------------------


@dataclass(frozen=True)
class _Constraint:
    """``sum(coefficients[v] * v) + constant <= 0`` over inputs only or outputs only, with its source."""

    kind: str  # "X", "Y" or "" for a constant comparison
    coefficients: tuple  # ((index, Fraction), ...)
    constant: Fraction
    line: int
    text: str
    strict: bool = False  # "< 0" rather than "<= 0"


class _Reader:
    """Reads commands in order: declarations first, then asserts over declared variables."""

    def __init__(self, where: str, n_inputs: int | None, n_outputs: int | None) -> None:
        self.where = where
        self.limits = {"X": n_inputs, "Y": n_outputs}
        self.declared: dict[str, dict[int, int]] = {"X": {}, "Y": {}}  # index -> declaration line
        self.disjuncts: list[list[_Constraint]] = [[]]

    def fail(self, line: int, message: str) -> VnnlibError:
        return _fail(self.where, line, message)

    def command(self, command) -> None:
        if not isinstance(command, _List) or command.head is None:
            raise self.fail(command.line, f"expected a command such as (assert ...), got {_shown(command)}")
        if command.head == "declare-const":
            self._declare(command)
        elif command.head == "assert":
            if len(command.items) != 2:
                raise self.fail(command.line, f"assert takes one formula, got {len(command.items) - 1}")
            self._conjoin(self._dnf(command.items[1]), command.line)
        else:
            raise self.fail(
                command.line,
                f"unsupported command ({_shown(command.head)} ...); certfsm reads declare-const and assert",
            )

    def _declare(self, command: _List) -> None:
        items = command.items
        if len(items) != 3 or not all(isinstance(item, _Atom) for item in items):
            raise self.fail(command.line, f"expected (declare-const NAME Real), got {_shown(command)}")
        name, sort = items[1].text, items[2].text
        match = _VARIABLE.match(name)
        if match is None:
            raise self.fail(
                command.line, f"unknown variable name {_shown(name)}; VNN-LIB names inputs X_i and outputs Y_j"
            )
        if sort != "Real":
            raise self.fail(command.line, f"{name} has sort {_shown(sort)}; VNN-LIB variables are Real")
        kind, index = match.group(1), int(match.group(2))
        if index in self.declared[kind]:
            first = self.declared[kind][index]
            raise self.fail(command.line, f"{name} is declared twice (first on line {first}); remove one")
        limit = self.limits[kind]
        if limit is not None and index >= limit:
            what = "inputs" if kind == "X" else "outputs"
            raise self.fail(
                command.line,
                f"{name} is beyond the network's {limit} {what} ({kind}_0..{kind}_{limit - 1}); "
                "check the property matches the network",
            )
        self.declared[kind][index] = command.line

    def _variable(self, atom: _Atom) -> tuple[str, int]:
        match = _VARIABLE.match(atom.text)
        if match is None or int(match.group(2)) not in self.declared[match.group(1)]:
            raise self.fail(
                atom.line,
                f"unknown variable {_shown(atom.text)}; "
                f"declare it with (declare-const {_shown(atom.text)} Real) before use",
            )
        return match.group(1), int(match.group(2))

    def _dnf(self, expr) -> list[list[_Constraint]]:
        """The formula as a list of disjuncts, each a list of constraints (all must hold)."""
        if isinstance(expr, _Atom):
            if expr.text in ("true", "false"):
                return [[]] if expr.text == "true" else []
            raise self.fail(expr.line, f"expected a formula, got {_shown(expr.text)}")
        head = expr.head
        if head == "and":
            result = [[]]
            for item in expr.items[1:]:
                result = self._product(result, self._dnf(item), expr.line)
            return result
        if head == "or":
            result = [disjunct for item in expr.items[1:] for disjunct in self._dnf(item)]
            if len(result) > _MAX_DISJUNCTS or sum(map(len, result)) > _MAX_DNF_SIZE:
                raise self._too_large(expr.line)
            return result
        if head in _COMPARISONS:
            return [self._comparisons(expr)]
        if head == "=":
            raise self.fail(expr.line, "equality (= ...) is not supported; write it as (<= a b) and (>= a b)")
        raise self.fail(
            expr.line, f"unsupported formula ({_shown(str(head))} ...); certfsm reads and, or, <=, >=, <, >"
        )

    def _too_large(self, line: int) -> VnnlibError:
        return self.fail(
            line,
            f"the formula expands to more than {_MAX_DISJUNCTS} disjuncts or {_MAX_DNF_SIZE} constraints "
            "in disjunctive normal form; split the property into several files",
        )

    def _product(self, left: list, right: list, line: int) -> list:
        """The conjunction of two DNFs (extends `left` in place when `right` is a single disjunct)."""
        size = sum(map(len, left)) * len(right) + len(left) * sum(map(len, right))
        if len(left) * len(right) > _MAX_DISJUNCTS or size > _MAX_DNF_SIZE:
            raise self._too_large(line)
        if len(right) == 1:
            for disjunct in left:
                disjunct.extend(right[0])
            return left
        return [a + b for a in left for b in right]

    def _conjoin(self, dnf: list, line: int) -> None:
        self.disjuncts = self._product(self.disjuncts, dnf, line)

    def _comparisons(self, expr: _List) -> list[_Constraint]:
        operands = expr.items[1:]
        if len(operands) < 2:
            raise self.fail(expr.line, f"({expr.head} ...) needs at least two terms, got {len(operands)}")
        terms = [self._linear(item) for item in operands]
        text = _render(expr)
        constraints = []
        for (low, low_c), (high, high_c) in zip(terms, terms[1:]):
            if expr.head in (">=", ">"):
                low, low_c, high, high_c = high, high_c, low, low_c
            coefficients = dict(low)
            for variable, value in high.items():
                coefficients[variable] = coefficients.get(variable, Fraction(0)) - value
            constraints.append(self._classify(coefficients, low_c - high_c, expr.line, text, expr.head in ("<", ">")))
        return constraints

    def _classify(self, coefficients: dict, constant: Fraction, line: int, text: str, strict: bool) -> _Constraint:
        coefficients = {variable: value for variable, value in coefficients.items() if value != 0}
        kinds = {kind for kind, _ in coefficients}
        if kinds == {"X", "Y"}:
            raise self.fail(
                line,
                f"{_shown(text)} mixes inputs X and outputs Y; VNN-LIB constrains inputs by bounds and outputs separately",
            )
        kind = kinds.pop() if kinds else ""
        if kind == "X" and len(coefficients) > 1:
            raise self.fail(
                line,
                f"{_shown(text)} constrains several inputs; "
                "certfsm supports an input box (one X_i against a number per comparison)",
            )
        for value in (constant, *coefficients.values()):
            self._exact(value, line, text)
        pairs = tuple(sorted((index, value) for (_, index), value in coefficients.items()))
        if kind == "X" and abs(constant / pairs[0][1]) > _LARGEST:
            raise self.fail(
                line,
                f"{_shown(text)} bounds X_{pairs[0][0]} by a number beyond the float64 range "
                "(above 1.8e308 in magnitude); use a finite bound",
            )
        return _Constraint(kind, pairs, constant, line, text, strict)

    def _exact(self, value: Fraction, line: int, source) -> Fraction:
        """`value` unchanged, once it fits float64's range and is small enough to compute with exactly.

        `source` (the term, or the comparison's text) names it in the message.
        """
        if abs(value) > _LARGEST:
            raise self.fail(
                line,
                f"{_shown(source)} has a coefficient or constant beyond the float64 range "
                "(above 1.8e308 in magnitude); use smaller numbers",
            )
        if value.numerator.bit_length() + value.denominator.bit_length() > _MAX_BITS:
            raise self.fail(
                line,
                f"{_shown(source)} has a coefficient or constant that needs more than {_MAX_BITS} "
                "bits to hold exactly; write its numbers with fewer digits",
            )
        return value

    def _number(self, atom: _Atom) -> Fraction:
        """The exact value of a numeral; its digits and exponent are checked before the Fraction is built.

        Building ``Fraction("1e-999999999")`` would compute a billion-digit
        power of ten, so the text is measured first.
        """
        match = _NUMBER.match(atom.text)
        mantissa, exponent = match["mantissa"], match["exponent"] or "0"
        digits = len(mantissa) - mantissa.count(".")
        if digits > _MAX_DIGITS:
            raise self.fail(
                atom.line,
                f"{_shown(atom.text, 40)} has {digits} digits; certfsm reads numbers of at "
                f"most {_MAX_DIGITS} digits (enough to write any float64 exactly), "
                "use fewer digits",
            )
        magnitude = exponent.lstrip("+-").lstrip("0")
        if len(magnitude) > len(str(_MAX_EXPONENT)) or int(magnitude or "0") > _MAX_EXPONENT:
            raise self.fail(
                atom.line,
                f"{_shown(atom.text, 40)} has the exponent {_shown(exponent, 20)}, outside "
                f"-{_MAX_EXPONENT}..{_MAX_EXPONENT} (float64 spans about 1e-324 to 1.8e308); "
                "write the number with an exponent in that range",
            )
        value = Fraction(atom.text)
        if abs(value) > _LARGEST:
            raise self.fail(atom.line, f"{_shown(atom.text, 40)} is beyond the float64 range; use a finite bound")
        return value

    def _linear(self, expr) -> tuple[dict, Fraction]:
        """A linear term as ({(kind, index): coefficient}, constant), exactly."""
        if isinstance(expr, _Atom):
            if _NUMBER.match(expr.text):
                return {}, self._number(expr)
            return {self._variable(expr): Fraction(1)}, Fraction(0)
        head, operands = expr.head, expr.items[1:]
        terms = [self._linear(item) for item in operands]
        if head in ("+", "-") and terms:
            signs = [-1] if head == "-" and len(terms) == 1 else [1] + [-1 if head == "-" else 1] * (len(terms) - 1)
            coefficients, constant = _combine(terms, signs)
            for value in (constant, *coefficients.values()):
                self._exact(value, expr.line, expr)
            return coefficients, constant
        if head == "*" and terms:
            variable_terms = [term for term in terms if term[0]]
            if len(variable_terms) > 1:
                raise self.fail(
                    expr.line,
                    f"{_shown(expr)} is a non-linear term; "
                    "certfsm supports linear constraints (a number times a variable)",
                )
            factor = Fraction(1)
            for coefficients, constant in terms:
                if not coefficients:
                    factor = self._exact(factor * constant, expr.line, expr)
            if not variable_terms:
                return {}, factor
            coefficients, constant = variable_terms[0]
            scaled = {
                variable: self._exact(value * factor, expr.line, expr) for variable, value in coefficients.items()
            }
            return scaled, self._exact(constant * factor, expr.line, expr)
        raise self.fail(
            expr.line, f"unsupported term {_shown(expr)}; certfsm reads numbers, X_i, Y_j, +, - and * by a number"
        )

    def properties(self, stem: str) -> list[Property]:
        n_inputs = self._count("X")
        n_outputs = self._count("Y")
        boxes: dict[tuple, list[Conjunction]] = {}
        empty_reasons = []
        for disjunct in self.disjuncts:
            try:
                box = self._box(disjunct, n_inputs)
            except _EmptyDisjunct as reason:
                empty_reasons.append(reason)
                continue
            rows = [self._exact_row(c) for c in disjunct if c.kind == "Y"]
            A = np.zeros((len(rows), n_outputs))
            for row, (coefficients, _, _) in enumerate(rows):
                for index, value in coefficients:
                    A[row, index] = float(value)
            exact_b = tuple(bound for _, bound, _ in rows)
            labels = tuple(f"{c.text} (line {c.line})" for c in disjunct if c.kind == "Y")
            strict = tuple(c.strict for c in disjunct if c.kind == "Y")
            conjunction = Conjunction(A, [float(v) for v in exact_b], labels, exact_b, strict)
            boxes.setdefault(box, []).append(conjunction)
        if not boxes:
            reason = empty_reasons[0] if empty_reasons else _EmptyDisjunct(1, "the asserts contradict each other")
            raise self.fail(
                reason.line,
                f"the unsafe set is empty ({reason.detail}), so the property would hold vacuously; fix the asserts",
            )
        if len(boxes) == 1:
            ((box, unsafe),) = boxes.items()
            return [_property(stem, box, unsafe, f"VNN-LIB file {self.where}", {"vnnlib": self.where})]
        return [
            _property(
                f"{stem}#{k}",
                box,
                unsafe,
                f"input box {k} of {len(boxes)} of VNN-LIB file {self.where}",
                {"vnnlib": self.where, "box": k},
            )
            for k, (box, unsafe) in enumerate(boxes.items())
        ]

    def _exact_row(self, constraint: _Constraint) -> tuple[tuple, Fraction, bool]:
        """(coefficients, right-hand side, strict) of ``sum(c y) + constant <= 0``, scaled so float64 holds every c.

        Scaling by a positive number leaves the set unchanged; a row whose
        integer coefficients outgrow float64's exact integers is refused.
        """
        coefficients, bound = constraint.coefficients, -constraint.constant
        if all(Fraction(float(value)) == value for _, value in coefficients):
            return coefficients, bound, constraint.strict
        scale = math.lcm(*(value.denominator for _, value in coefficients))
        scaled = tuple((index, value * scale) for index, value in coefficients)
        if any(abs(value) > _LARGEST_EXACT_INTEGER for _, value in scaled):
            raise self.fail(
                constraint.line,
                f"{_shown(constraint.text)} has coefficients that no float64 holds "
                "exactly, even scaled to integers; write them with fewer digits",
            )
        if abs(bound * scale) > _LARGEST:
            raise self.fail(
                constraint.line,
                f"{_shown(constraint.text)}, scaled to make its coefficients "
                "float64 integers, has a right-hand side beyond the float64 range; "
                "write the coefficients with fewer digits",
            )
        return scaled, bound * scale, constraint.strict

    def _count(self, kind: str) -> int:
        declared = self.declared[kind]
        what = "inputs" if kind == "X" else "outputs"
        if not declared:
            raise self.fail(1, f"declares no {what}; add (declare-const {kind}_0 Real) and the rest")
        count = max(declared) + 1
        missing = next(index for index in range(count + 1) if index not in declared)  # at most len(declared) steps
        names = f"{kind}_0..{kind}_{count - 1}"
        if missing < count:
            raise self.fail(
                declared[count - 1], f"declares {kind}_{count - 1} but not {kind}_{missing}; declare {names}"
            )
        limit = self.limits[kind]
        if limit is not None and count != limit:
            raise self.fail(
                declared[count - 1],
                f"declares {count} {what} ({names}) but the network has {limit}; check the property matches the network",
            )
        return count

    def _box(self, disjunct: list[_Constraint], n_inputs: int) -> tuple:
        """The disjunct's input box, exactly: ((lower, open), (upper, open)) per input, as a hashable tuple."""
        lower: list = [None] * n_inputs
        upper: list = [None] * n_inputs
        lower_line, upper_line = [0] * n_inputs, [0] * n_inputs
        for constraint in disjunct:
            if constraint.kind == "":
                if constraint.constant > 0 or (constraint.strict and constraint.constant == 0):
                    raise _EmptyDisjunct(constraint.line, f"{_shown(constraint.text)} is false")
                continue
            if constraint.kind != "X":
                continue
            ((index, coefficient),) = constraint.coefficients
            bound = (-constraint.constant / coefficient, constraint.strict)
            if coefficient > 0 and (upper[index] is None or _tighter(bound, upper[index], -1)):
                upper[index], upper_line[index] = bound, constraint.line
            elif coefficient < 0 and (lower[index] is None or _tighter(bound, lower[index], +1)):
                lower[index], lower_line[index] = bound, constraint.line
        for index in range(n_inputs):
            for side, values, bound_kind in (("lower", lower, ">="), ("upper", upper, "<=")):
                if values[index] is None:
                    raise self.fail(
                        self.declared["X"][index],
                        f"input X_{index} has no {side} bound; add (assert ({bound_kind} X_{index} <number>))",
                    )
            (low, low_open), (high, high_open) = lower[index], upper[index]
            if low > high or (low == high and (low_open or high_open)):
                raise _EmptyDisjunct(
                    max(lower_line[index], upper_line[index]),
                    f"X_{index} {'>' if low_open else '>='} {float(low)!r} (line {lower_line[index]}) "
                    f"and X_{index} {'<' if high_open else '<='} {float(high)!r} (line {upper_line[index]})",
                )
        return tuple(lower), tuple(upper)


def _tighter(bound: tuple, current: tuple, direction: int) -> bool:
    """Is `bound` (value, strict) tighter than `current`? direction +1 for lower bounds, -1 for upper."""
    if bound[0] != current[0]:
        return (bound[0] - current[0]) * direction > 0
    return bound[1] and not current[1]


def _property(name: str, box: tuple, unsafe: list, description: str, metadata: dict) -> Property:
    lower, upper = box
    return Property(
        name,
        np.array([float(value) for value, _ in lower]),
        np.array([float(value) for value, _ in upper]),
        tuple(unsafe),
        description,
        metadata,
        exact_lower=tuple(value for value, _ in lower),
        exact_upper=tuple(value for value, _ in upper),
        open_lower=tuple(is_open for _, is_open in lower),
        open_upper=tuple(is_open for _, is_open in upper),
    )


class _EmptyDisjunct(Exception):
    """A disjunct that no point satisfies (an empty box or a false constant comparison)."""

    def __init__(self, line: int, detail: str) -> None:
        super().__init__(detail)
        self.line, self.detail = line, detail


def _combine(terms: list, signs: list) -> tuple[dict, Fraction]:
    coefficients: dict = {}
    constant = Fraction(0)
    for (term_coefficients, term_constant), sign in zip(terms, signs):
        constant += sign * term_constant
        for variable, value in term_coefficients.items():
            coefficients[variable] = coefficients.get(variable, Fraction(0)) + sign * value
    return coefficients, constant
