"""Proof certificates: the partition a proof built and what closed each part, as one canonical JSON file.

docs/design.md, "Box trees": a certificate keeps, for each disjunct of a
property's unsafe set, the box tree of the input box that branch and
bound built (the core's encoding, `certfsm.encode_tree`) and, per leaf,
what refuted that disjunct there, so that a checker sharing no code with
the prover (`certfsm.checker`) re-checks the proof without searching.

The file (``certfsm_certificate`` 2), canonical JSON (sorted keys, no
spaces), writes each unsafe set and each disjunct's proof once, however
many properties share it (a distillation's cells of one token state the
same "the decision is not t", and most of their proofs are the same one
leaf), and holds:

- ``network_sha256``: the SHA-256 of the ONNX file the proof is about;
- ``unsafe_sets``: the distinct unsafe sets, each a list of disjuncts,
  each a list of rows ``{"coefficients", "rhs", "strict"}`` (docs/
  semantics.md, "Properties"), every number the exact rational as a
  string: a decimal where one is exact, else ``p/q``;
- ``proofs``: the distinct proofs of one disjunct, each ``{"tree",
  "leaves"}``: ``tree`` in pre-order, ``["split", input, threshold]`` /
  ``["leaf", k]``, thresholds float64, each the float midpoint branch and
  bound split at (the low child holds ``x_input < threshold``, the high
  child the rest, so the leaves partition the closed input box), and
  ``leaves``, the evidence of leaf k: ``{"bounds": {"row": r, "slopes":
  NAME}}`` (row r of the disjunct, lower slopes by
  `_bounds.SLOPE_CHOICES` name), ``{"bounds": {"weights": [...],
  "neurons": [...], "slopes": [...]}}`` (rows combined with those
  weights, lower slope ``slopes[i]`` on hidden neuron ``neurons[i]``,
  counted through the hidden layers in order), or ``{"z3": {"file",
  "sha256"}}`` (an SMT-LIB query of the leaf box and the disjunct alone,
  written beside the certificate, unsat);
- ``properties``: one per property proved (a VNN-LIB instance may split
  its box), ``{"name", "inputs", "unsafe", "proofs"}``: ``inputs`` the
  closed box, ``[lower, upper]`` per input (exact, as above: a property
  over a box with open ends is proved on its closure, which contains
  it), ``unsafe`` the index of its unsafe set in ``unsafe_sets`` and
  ``proofs`` the index in ``proofs`` of the proof of each of its
  disjuncts, in order.

Format 1 wrote each property's unsafe set and proofs inline (and its box
with open ends); the checker reads format 2 alone and refuses another,
naming the field and asking for the certificate to be written again.

The tree of a disjunct is rebuilt from the boxes on which it closed
(`_split.Closure`) and the inputs the search halved them on
(`_split.Cut`): branch and bound halves a box at the float64 midpoint of
one input, so a node's children are found by the input the search cut
that box on, or else by the one input whose midpoint no leaf straddles.
Following the search's own cuts gives the checker the same parents to
inherit bounds from (bounds are not monotone in the box: another order
of the same partition can leave a leaf looser). Leaves that do not partition the box
exactly (a gap, an overlap) or a closure without evidence leave no
certificate: `certificate_document` says why, and the verdict stands.
"""

from __future__ import annotations

import functools
import hashlib
import json
from fractions import Fraction
from pathlib import Path

import numpy as np

from certfsm import Box, BoxTree, Interval, Leaf, LeafStatus, Split, encode_tree

from ._property import Property
from ._smtlib import smtlib_script
from ._split import Closure, Cut

FORMAT_VERSION = 2


class NoCertificate(Exception):
    """The recorded proof cannot become a certificate (the message says why)."""


@functools.lru_cache(maxsize=1 << 16)
def exact_text(value: Fraction) -> str:
    """An exact rational as text: its decimal where that is finite, else ``p/q``."""
    value = Fraction(value)
    denominator, twos, fives = value.denominator, 0, 0
    while denominator % 2 == 0:
        denominator, twos = denominator // 2, twos + 1
    while denominator % 5 == 0:
        denominator, fives = denominator // 5, fives + 1
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = max(twos, fives)
    scaled = abs(value.numerator) * 10**digits // value.denominator
    sign = "-" if value < 0 else ""
    if not digits:
        return f"{sign}{scaled}"
    text = str(scaled).rjust(digits + 1, "0")
    return f"{sign}{text[:-digits]}.{text[-digits:]}"


@functools.lru_cache(maxsize=64)
def _unsafe_document(unsafe: tuple) -> list:
    """The unsafe set's disjuncts as stated; written once per set (a distillation's cells of one token share it:
    conjunctions hash by identity, and the cache holds them, so an identity is never reused while cached)."""
    return [
        [
            {
                "coefficients": [_float_text(float(a)) for a in row],
                "rhs": exact_text(rhs),
                "strict": bool(strict),
            }
            for row, rhs, strict in zip(conjunction.A, conjunction.exact_b, conjunction.strict)
        ]
        for conjunction in unsafe
    ]


@functools.lru_cache(maxsize=1 << 16)
def _float_text(value: float) -> str:
    return exact_text(Fraction(value))


def property_document(prop: Property, name: str | None = None) -> dict:
    """The property as stated, every constant exact (docs/semantics.md, "Decimal constants", "Strict atoms"), under
    `name` when given (else its own); its unsafe set in full (`certificate_bytes` writes it once per certificate)."""
    return {
        "name": prop.name if name is None else name,
        "inputs": [[exact_text(lo), exact_text(hi)] for lo, hi in zip(prop.exact_lower, prop.exact_upper)],
        "unsafe": _unsafe_document(prop.unsafe),
    }


def _evidence(evidence: tuple) -> dict:
    if evidence[0] == "row":
        return {"bounds": {"row": int(evidence[1]), "slopes": evidence[2]}}
    _, weights, neurons, slopes = evidence
    return {
        "bounds": {
            "weights": [float(w) for w in weights],
            "neurons": [int(n) for n in neurons],
            "slopes": [float(s) for s in slopes],
        }
    }


def _tree(prop: Property, lowers: np.ndarray, uppers: np.ndarray, cuts: dict) -> tuple:
    """(root node, leaf order): the split tree whose leaves are exactly the boxes [lowers[i], uppers[i]].

    `cuts`: {(lower bytes, upper bytes): input} of the boxes the search
    halved, tried first at each node. Raises NoCertificate where the boxes
    do not partition the property's box by midpoint splits.
    """
    order: list[int] = []

    def build(members: np.ndarray, low: np.ndarray, high: np.ndarray, depth: int):
        if not members.size:
            raise NoCertificate(f"no closed box covers [{low.tolist()}, {high.tolist()}]")
        if members.size == 1 and np.array_equal(lowers[members[0]], low) and np.array_equal(uppers[members[0]], high):
            order.append(int(members[0]))
            return Leaf(LeafStatus.EXACT, 0, 0)
        first = cuts.get((low.tobytes(), high.tobytes()))
        for dim in ([first] if first is not None else []) + list(np.flatnonzero(high > low)):
            middle = (low[dim] + high[dim]) / 2.0
            below = uppers[members, dim] <= middle
            if np.all(below | (lowers[members, dim] >= middle)) and below.any() and not below.all():
                low_high, high_low = high.copy(), low.copy()
                low_high[dim], high_low[dim] = middle, middle
                return Split(
                    int(dim),
                    Fraction(float(middle)),
                    build(members[below], low, low_high, depth + 1),
                    build(members[~below], high_low, high, depth + 1),
                )
        raise NoCertificate(f"the closed boxes inside [{low.tolist()}, {high.tolist()}] overlap or leave a gap")

    root = build(np.arange(len(lowers)), np.asarray(prop.lower, float), np.asarray(prop.upper, float), 0)
    return root, order


def _root_box(prop: Property) -> Box:
    return Box(tuple(Interval(lo, hi, True) for lo, hi in zip(prop.exact_lower, prop.exact_upper)))


def proof_documents(
    network, prop: Property, closures: tuple, queries: str, index: int, name: str | None = None
) -> tuple[dict, dict]:
    """The property's entry of a certificate and its z3 query files ({relative path: text}).

    `queries`: the folder (relative to the certificate) the query files go
    to; `index`: the property's position, so that the files' names differ.
    """
    files: dict[str, str] = {}
    proofs = []
    cuts = {(c.lower.tobytes(), c.upper.tobytes()): c.dim for c in closures if isinstance(c, Cut)}
    closures = tuple(c for c in closures if isinstance(c, Closure))
    for disjunct in range(len(prop.unsafe)):
        mine = [c for c in closures if c.disjunct == disjunct]
        if any(c.evidence is None for c in mine):
            raise NoCertificate(f"a box of disjunct {disjunct} closed without recorded evidence")
        if not mine:
            raise NoCertificate(f"no box of disjunct {disjunct} was recorded closed")
        if any(c.evidence[0] == "lp" for c in mine):
            raise NoCertificate(
                f"a box of disjunct {disjunct} was closed by ReLU splitting with exact LP bounds, "
                "whose evidence the checker does not read yet"
            )
        lowers = np.array([c.lower for c in mine])
        uppers = np.array([c.upper for c in mine])
        root, order = _tree(prop, lowers, uppers, cuts)
        if isinstance(root, Leaf):  # the whole box closed at once, as for most cells of a distillation
            encoded = [["leaf", 0]]  # what `encode_tree` writes for it, without building the tree's boxes
        else:
            try:
                encoded = encode_tree(BoxTree(_root_box(prop), root, (None,) * prop.n_inputs))
            except ValueError as error:
                raise NoCertificate(f"disjunct {disjunct}: {error}") from None
        leaves = []
        for number, at in enumerate(order):
            closure = mine[at]
            if closure.evidence[0] != "z3":
                leaves.append(_evidence(closure.evidence))
                continue
            part = prop.restricted(closure.lower, closure.upper, (prop.unsafe[disjunct],))
            text = smtlib_script(network, part, "unsat")
            name = f"{queries}/p{index}-d{disjunct}-leaf{number}.smt2"
            files[name] = text
            leaves.append({"z3": {"file": name, "sha256": hashlib.sha256(text.encode()).hexdigest()}})
        proofs.append({"tree": encoded, "leaves": leaves})
    return {**property_document(prop, name), "proofs": proofs}, files


def certificate_bytes(network, entries: list[dict]) -> bytes:
    """The canonical bytes of a certificate over `entries` (from `proof_documents`): each distinct unsafe set and
    disjunct proof written once, in order of first use, and each entry referring to them by index."""
    shared: dict[str, dict[str, int]] = {"unsafe_sets": {}, "proofs": {}}

    def index(table: str, value) -> int:
        return shared[table].setdefault(_canonical(value), len(shared[table]))

    properties = [
        {
            **entry,
            "unsafe": index("unsafe_sets", entry["unsafe"]),
            "proofs": [index("proofs", p) for p in entry["proofs"]],
        }
        for entry in entries
    ]
    document = {
        "certfsm_certificate": FORMAT_VERSION,
        "network_sha256": network.sha256,
        "properties": properties,
        **{table: [json.loads(text) for text in written] for table, written in shared.items()},
    }
    return (_canonical(document) + "\n").encode()


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def write_certificate(path, network, properties: list[Property], results) -> str:
    """The SHA-256 of the certificate written to `path`, or '' when the proofs leave none (nothing written)."""
    try:
        return write_proof_certificate(path, network, properties, results)
    except NoCertificate:
        return ""


def write_cell_certificate(
    path, network, claims: list[tuple[str, Property, tuple]]
) -> tuple[str, tuple[bool, ...], str]:
    """One certificate of many box claims (distill's exact cells and leaves): (SHA-256, per claim whether it is in
    the certificate, why the first one left out was).

    `claims`: (name, property proved, its recorded closures and cuts) each;
    the property is renamed to `name` (e.g. "cell 17: decision is HIGH"),
    so the certificate says which cell or leaf each entry is about. A
    claim whose proof makes no certificate is left out, its reason kept
    (the first one); the others are written as `write_proof_certificate`
    writes them, query files beside the certificate.
    """
    path = Path(path)
    queries = _queries_folder(path)
    entries, files, missing, written = [], {}, "", []
    for name, prop, closures in claims:
        try:
            entry, more = proof_documents(network, prop, closures, queries, len(entries), name)
        except NoCertificate as why:
            missing = missing or f"{name}: {why}"
            written.append(False)
            continue
        entries.append(entry)
        files.update(more)
        written.append(True)
    return _write(path, network, entries, files), tuple(written), missing


def write_proof_certificate(path, network, properties: list[Property], results) -> str:
    """Write the certificate of `properties` (each proved, with its recorded proof) to `path`; its SHA-256.

    Query files go to the folder ``<path without .json>.queries`` beside it.
    Raises NoCertificate (nothing written) where a proof was not recorded
    or does not make a certificate.
    """
    path = Path(path)
    queries = _queries_folder(path)
    entries, files = [], {}
    for index, (prop, result) in enumerate(zip(properties, results)):
        if result.verdict != "proved" or result.proof is None:
            raise NoCertificate(f"{prop.name}: {result.verdict} without a recorded proof")
        entry, more = proof_documents(network, prop, result.proof, queries, index)
        entries.append(entry)
        files.update(more)
    return _write(path, network, entries, files)


def _queries_folder(path: Path) -> str:
    """Where a certificate's Z3 query files go, relative to it: ``<name without .json>.queries``."""
    return path.name.removesuffix(".json") + ".queries"


def _write(path: Path, network, entries: list[dict], files: dict[str, str]) -> str:
    """Write the query files, then the certificate over `entries`; the certificate's SHA-256."""
    data = certificate_bytes(network, entries)
    path.parent.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path.parent / name).parent.mkdir(parents=True, exist_ok=True)
        (path.parent / name).write_text(text)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()
