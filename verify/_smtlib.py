"""SMT-LIB 2.6 text for one (network, property) query, and the report file that holds it.

The script is the whole verification question in a form any SMT solver
reads: "is there an input in the box whose outputs fall in the unsafe
set?" -- ``unsat`` means the property holds. It encodes exactly the IR:
every weight, bias and bound is the exact decimal of its stored float64
(see `_exact`), so re-running the file checks the very numbers that were
verified. The Z3 back-end solves this same text, so the file and the
engine cannot drift apart.

Variable names: ``X_i`` inputs and ``Y_j`` outputs (the VNN-LIB names),
``Z_l_k`` the pre-activation and ``H_l_k`` the ReLU output of neuron k of
``network.layers[l]``. A layer's pre-activation is over the variables of
the activations it reads (``X_i`` the input, ``H_l_k`` hidden layer l),
concatenated in order: the chain's one activation, or several in a graph
network (`certfsm.Network.reads`).
"""

from __future__ import annotations

import hashlib
import os
import re
from fractions import Fraction
from pathlib import Path

from certfsm import SpecError, certfsm_version, write_atomically

from ._exact import rational_term
from ._property import Property

STATUS_OF_VERDICT = {"proved": "unsat", "violated": "sat", "unknown": "unknown"}
STATUSES = ("sat", "unsat", "unknown")


def input_name(i: int) -> str:
    return f"X_{i}"


def output_name(j: int) -> str:
    return f"Y_{j}"


def one_line(text) -> str:
    """`text` on one line (whitespace runs become one space): what a header value may hold."""
    return " ".join(str(text).split())


def _header_key(key) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", str(key)).strip("-") or "extra"


def _term(coefficient, name: str) -> str:
    if coefficient == 1:
        return name
    if coefficient == -1:
        return f"(- {name})"
    return f"(* {rational_term(Fraction(coefficient))} {name})"


def linear_expression(coefficients, names, constant=0.0) -> str:
    """sum(c * name) + constant with zero coefficients dropped; "0.0" when nothing is left.

    Coefficients and the constant are floats (written as their exact
    decimals) or Fractions (written exactly, as a decimal or a quotient).
    """
    terms = [
        _term(c if isinstance(c, Fraction) else Fraction(float(c)), name)
        for c, name in zip(coefficients, names)
        if c != 0
    ]
    if constant != 0:
        terms.append(rational_term(constant if isinstance(constant, Fraction) else Fraction(float(constant))))
    if not terms:
        return "0.0"
    return terms[0] if len(terms) == 1 else f"(+ {' '.join(terms)})"


def _junction(operator: str, parts: list[str], empty: str) -> str:
    """(and ...)/(or ...) that stays valid SMT-LIB for zero or one operand."""
    if not parts:
        return empty
    return parts[0] if len(parts) == 1 else f"({operator} {' '.join(parts)})"


def _relu(pre: str, post: str, phase: int = 0) -> str:
    # post = max(pre, 0) as "post >= 0, post >= pre, and post is 0 or pre".
    # The two inequalities are the ReLU's convex hull from below and hold
    # in every phase, so the simplex starts from that relaxation; only the
    # final disjunction is a case split. On random 2-input networks with 8
    # to 16 ReLUs and float32 weights (6 queries per size) z3 solved this
    # form 1.1 to 5 times faster than the phase disjunction
    # (or (and (>= pre 0) (= post pre)) (and (< pre 0) (= post 0))) and 1.6
    # to 6 times faster than (= post (ite (> pre 0) pre 0)); all three mean
    # the same. A phase proved by bounds needs no case split.
    if phase > 0:
        return f"(and (>= {pre} 0.0) (= {post} {pre}))"
    if phase < 0:
        return f"(and (<= {pre} 0.0) (= {post} 0.0))"
    return f"(and (>= {post} 0.0) (>= {post} {pre}) (or (= {post} 0.0) (= {post} {pre})))"


def _check_shapes(network, prop: Property) -> None:
    network_name = os.path.basename(network.source_path) or "the network"
    if prop.n_inputs != network.n_inputs:
        raise SpecError(
            f"property {prop.name!r} has an input box over {prop.n_inputs} inputs but "
            f"{network_name} takes {network.n_inputs}; use a property written for this network"
        )
    for index, conjunction in enumerate(prop.unsafe):
        if conjunction.A.shape[1] != network.n_outputs:
            raise SpecError(
                f"property {prop.name!r}: unsafe[{index}] constrains {conjunction.A.shape[1]} "
                f"outputs but {network_name} gives {network.n_outputs}; "
                "use a property written for this network"
            )


def _reads_comment(network, index: int) -> str:
    """The comment tail ", reads X, H_0" of a graph network's layer (what its x concatenates); "" in a chain.

    A chain's text stays as it always was (report files carry its hash);
    in a graph every layer says what it reads, so a reader of the file
    need not infer it from the variable names.
    """
    if network.is_chain:
        return ""
    return ", reads " + ", ".join("X" if r == 0 else f"H_{r - 1}" for r in network.reads[index])


def smtlib_body(network, prop: Property, phases=None) -> list[str]:
    """Declarations and assertions only (no set-info, no check-sat), one command per line.

    Everything is exact: the box's and the unsafe rows' rational
    constants, strict rows and open box bounds as ``<``, and each layer's
    exact weights (its rationals where a fold rounded). `phases` (one int8
    per hidden neuron, layer by layer: -1 proved inactive, +1 proved
    active, 0 unknown) replaces a neuron's case split by its phase; the
    caller must have proved those phases over the box (sound bounds).
    """
    _check_shapes(network, prop)
    inputs = [input_name(i) for i in range(network.n_inputs)]
    outputs = [output_name(j) for j in range(network.n_outputs)]
    lines = ["; inputs and outputs"]
    lines += [f"(declare-const {name} Real)" for name in inputs + outputs]
    for index, layer in enumerate(network.layers[:-1]):
        lines.append(f"; layer {index} ({one_line(layer.source)}): pre-activation Z_{index}_k, ReLU output H_{index}_k")
        lines += [f"(declare-const Z_{index}_{k} Real)" for k in range(layer.n_out)]
        lines += [f"(declare-const H_{index}_{k} Real)" for k in range(layer.n_out)]
    lines.append("; input box")
    for name, lo, hi, lo_open, hi_open in zip(
        inputs, prop.exact_lower, prop.exact_upper, prop.open_lower, prop.open_upper
    ):
        lines.append(
            f"(assert (and ({'<' if lo_open else '<='} {rational_term(lo)} {name}) "
            f"({'<' if hi_open else '<='} {name} {rational_term(hi)})))"
        )
    activations = [inputs]
    offset = 0
    for index, layer in enumerate(network.layers):
        is_output = index == len(network.layers) - 1
        kind = "output layer" if is_output else "affine and ReLU"
        exactness = "" if layer.is_exact else ", exact rational weights of a rounded fold"
        lines.append(
            f"; layer {index} ({one_line(layer.source)}): {kind}, {layer.n_out} x {layer.n_in}{exactness}"
            f"{_reads_comment(network, index)}"
        )
        targets = outputs if is_output else [f"Z_{index}_{k}" for k in range(layer.n_out)]
        weights = layer.weight if layer.is_exact else layer.exact_weight()
        biases = layer.bias if layer.is_exact else layer.exact_bias()
        previous = network.gather(index, activations)
        for k, target in enumerate(targets):
            expression = linear_expression(weights[k], previous, biases[k])
            lines.append(f"(assert (= {target} {expression}))")
        if not is_output:
            posts = [f"H_{index}_{k}" for k in range(layer.n_out)]
            known = [0] * layer.n_out if phases is None else [int(p) for p in phases[offset : offset + layer.n_out]]
            lines += [f"(assert {_relu(pre, post, phase)})" for pre, post, phase in zip(targets, posts, known)]
            activations.append(posts)
            offset += layer.n_out
    lines.append("; unsafe set: some disjunct has every row A @ Y <= b (< b where strict)")
    disjuncts = []
    for conjunction in prop.unsafe:
        rows = [
            f"({'<' if strict else '<='} {linear_expression(row, outputs)} {rational_term(bound)})"
            for row, bound, strict in zip(conjunction.A, conjunction.exact_b, conjunction.strict)
        ]
        disjuncts.append(_junction("and", rows, "true"))
    lines.append(f"(assert {_junction('or', disjuncts, 'false')})")
    return lines


def smtlib_text(body: list[str], logic: str, status: str = "unknown") -> str:
    """A standalone SMT-LIB 2.6 script: version, logic and status, then `body`, then check-sat.

    Every certfsm query file (network properties here, table and machine
    proofs in `certfsm.fsm`) is written through this one function.
    """
    if status not in STATUSES:
        raise ValueError(f"status={status!r} is not one of {STATUSES}")
    lines = ["(set-info :smt-lib-version 2.6)", f"(set-logic {logic})", f"(set-info :status {status})"]
    return "\n".join(lines + list(body) + ["(check-sat)", "(exit)"]) + "\n"


def smtlib_script(network, prop: Property, status: str = "unknown", phases=None) -> str:
    """A standalone SMT-LIB 2.6 script in QF_LRA; ``unsat`` means the property holds (see `smtlib_body`)."""
    return smtlib_text(smtlib_body(network, prop, phases), "QF_LRA", status)


def query_header(
    file_name: str,
    *,
    prop_name: str,
    description: str = "",
    verdict: str,
    status: str,
    engine: str,
    seconds: float | None,
    network=None,
    property_text: str = "",
    tool_version: str | None = None,
    extra: dict | None = None,
) -> list[str]:
    """The ';' comment lines that open a query file: ``; key: value``, one per line.

    `seconds=None` and `tool_version=None` leave those volatile lines out
    (golden files). `network` adds the model's file name and SHA-256.
    Keys and values are single lines, so `read_header` gives them back
    exactly.
    """
    lines = ["; certfsm SMT-LIB 2.6 query: unsat means the property holds, sat that it is violated"]
    if tool_version is not None:
        lines.append(f"; certfsm-version: {one_line(tool_version)}")
    lines += [f"; property: {one_line(prop_name)}"]
    if description:
        lines.append(f"; description: {one_line(description)}")
    lines += [f"; verdict: {verdict}", f"; status: {status}", f"; engine: {one_line(engine)}"]
    if seconds is not None:
        lines.append(f"; seconds: {seconds:.3f}")
    if network is not None:
        lines += [
            f"; network: {os.path.basename(network.source_path) or '(in memory)'}",
            f"; network-sha256: {network.sha256 or '(none)'}",
        ]
    for key, value in (extra or {}).items():
        lines.append(f"; {_header_key(key)}: {one_line(value)}")
    lines += [
        f"; rerun: z3 {file_name}",
        f"; rerun: cvc5 {file_name}",
        "; rerun: certfsm recheck .  (in the folder that holds this file)",
    ]
    if property_text:
        lines.append("; property-text:")
        lines += [f";   {line}".rstrip() for line in property_text.splitlines()]
    return lines


def smtlib_header(
    file_name: str,
    network,
    prop: Property,
    *,
    verdict: str,
    status: str,
    engine: str,
    seconds: float | None,
    property_text: str = "",
    tool_version: str | None = None,
    extra: dict | None = None,
) -> list[str]:
    """`query_header` for a network property."""
    return query_header(
        file_name,
        prop_name=prop.name,
        description=prop.description,
        verdict=verdict,
        status=status,
        engine=engine,
        seconds=seconds,
        network=network,
        property_text=property_text,
        tool_version=tool_version,
        extra=extra,
    )


def write_query(path, header: list[str], script: str) -> str:
    """Write header + script to `path` atomically and return the file's SHA-256 (hex)."""
    data = ("\n".join(header) + "\n" + script).encode("utf-8")
    write_atomically(Path(path), data, what="SMT-LIB file", fix="check that the folder exists and is writable")
    return hashlib.sha256(data).hexdigest()


def write_proof_query(
    path,
    body: list[str],
    logic: str,
    *,
    prop_name: str,
    description: str,
    verdict: str,
    seconds: float | None,
    engine: str = "z3",
    stable: bool = False,
    extra: dict | None = None,
) -> str:
    """A query file for a proof that is not about a network (a table, a state machine); returns its SHA-256.

    The status is the one the verdict implies; `stable` leaves out the
    time and the tool version (golden files), `seconds=None` the time
    alone (a file whose hash an artifact records must not hold run facts).
    """
    path = Path(path)
    status = STATUS_OF_VERDICT[verdict]
    header = query_header(
        path.name,
        prop_name=prop_name,
        description=description,
        verdict=verdict,
        status=status,
        engine=engine,
        seconds=None if stable else seconds,
        tool_version=None if stable else certfsm_version(),
        extra=extra,
    )
    return write_query(path, header, smtlib_text(body, logic, status))


_HEADER_LINE = re.compile(r"^; ([A-Za-z0-9_-]+): (.*)$")
_STATUS = re.compile(r"^\(set-info :status (\w+)\)\s*$", re.MULTILINE)


def read_header(text: str) -> dict[str, str]:
    """The ``; key: value`` lines before the first command (the first key wins)."""
    header: dict[str, str] = {}
    for line in text.splitlines():
        if not line.startswith(";"):
            if line.strip():
                break
            continue
        match = _HEADER_LINE.match(line)
        if match:
            header.setdefault(match.group(1), match.group(2))
    return header


def read_status(text: str) -> str | None:
    """The script's ``(set-info :status ...)``, or None when it has none."""
    match = _STATUS.search(text)
    return match.group(1) if match else None


def write_smtlib(
    path,
    network,
    prop: Property,
    *,
    verdict: str,
    engine: str,
    seconds: float,
    status: str | None = None,
    property_text: str = "",
    tool_version: str | None = None,
    extra: dict | None = None,
    stable: bool = False,
) -> str:
    """Write header + script to `path` atomically and return the file's SHA-256 (hex).

    `status` defaults to the one the verdict implies (proved -> unsat,
    violated -> sat, unknown -> unknown); a different status is allowed
    (a sub-box of a violated property can be unsat) except that a proved
    verdict always needs unsat. `stable=True` leaves out the time and the
    tool version so the bytes depend only on the query (golden files).
    """
    if verdict not in STATUS_OF_VERDICT:
        raise ValueError(f"verdict={verdict!r} is not one of {tuple(STATUS_OF_VERDICT)}")
    status = STATUS_OF_VERDICT[verdict] if status is None else status
    if status not in STATUSES:
        raise ValueError(f"status={status!r} is not one of {STATUSES}")
    if verdict == "proved" and status != "unsat":
        raise ValueError(f"verdict=proved needs status unsat, got status={status!r}")
    path = Path(path)
    if stable:
        version, when = None, None
    else:
        version = certfsm_version() if tool_version is None else tool_version
        when = seconds
    header = smtlib_header(
        path.name,
        network,
        prop,
        verdict=verdict,
        status=status,
        engine=engine,
        seconds=when,
        property_text=property_text,
        tool_version=version,
        extra=extra,
    )
    return write_query(path, header, smtlib_script(network, prop, status))
