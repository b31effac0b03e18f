"""certfsm.checker: re-check a proof certificate without re-proving, sharing no code with the prover.

It imports numpy and onnx only: nothing of certfsm (docs/design.md, "Box
trees", "Checking"); threadpoolctl, when installed, only keeps numpy's
BLAS on one thread while it checks (many small products, which threads
slow down). The certificate format is stated in
`certfsm.verify._certificate`'s docstring; this package reads it by its
own code, so a rule stated wrongly on either side shows as a refusal.

`check_certificate(path, model)` answers `Checked`, else names the first
failing leaf and why; `check_report(folder)` checks every certificate a
report lists. `CertificateError` (a ValueError) is bad input.

Soundness argument. A property says: no x in the box B (exact rational
bounds) has outputs in the unsafe set, a union of disjuncts D_k, each a
conjunction of rows ``a . y <= b`` (``<`` when strict). It holds when,
for every k, no x in B reaches D_k. For each k the certificate gives a
tree; `_leaf_boxes` re-derives each node's box from B and the splits,
refuses a threshold not strictly inside its node, and the children of a
node are ``x_i < t`` and ``x_i >= t``, so the leaves partition B; each
leaf's closed box, rounded outward to floats, contains the leaf. On each
leaf the evidence gives weights w >= 0 over D_k's rows and lower slopes;
`checker._arith` computes a true lower bound L of ``sum_r w_r (a_r . y -
b_r)`` over the whole closed leaf box, for the network whose weights are
the ONNX file's float32 values read exactly (every intermediate bound it
needs computed again from the weights and the box, with outward rounding;
its docstring says why each step is sound). If L > 0, every x of the leaf
has some row with ``a_r . y > b_r``, so the conjunction fails there; if
L >= 0 and every row with w_r > 0 is strict or has its float right-hand
side above the exact one, the same follows. The right-hand sides are the
exact rationals written, rounded up. A leaf that Z3 closed is decided
again by a query this checker builds, in exact rationals
(`checker._exact`). So D_k is reached on no leaf, hence nowhere in B.
The network is the file whose SHA-256 the certificate names.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ._arith import ModelError, forward, lower_bound, read_model
from ._exact import z3_refutes

__all__ = ["CertificateError", "Checked", "check_certificate", "check_report"]

FORMAT_VERSION = 1
_CHUNK = 256
_Z3_SECONDS = 300.0
_SLOPE_CODES = {"adaptive": np.nan, "zero": 0.0, "one": 1.0, "parallel": -1.0}


class CertificateError(ValueError):
    """A certificate or model that cannot be read as one (the message names the file and the fix)."""


@dataclass(frozen=True)
class Checked:
    """The outcome of checking one certificate: `ok`, else `failure` names the first failing leaf."""

    certificate: str
    ok: bool
    leaves: int
    seconds: float
    failure: str = ""


def _float_down(value: Fraction) -> float:
    x = float(value)
    return float(np.nextafter(x, -np.inf)) if Fraction(x) > value else x


def _float_up(value: Fraction) -> float:
    x = float(value)
    return float(np.nextafter(x, np.inf)) if Fraction(x) < value else x


def _rational(text, where: str) -> Fraction:
    try:
        return _fraction(text)
    except (TypeError, ValueError, ZeroDivisionError):
        raise CertificateError(f"{where}={text!r} is not an exact number written as a string") from None


@functools.lru_cache(maxsize=1 << 16)
def _fraction(text) -> Fraction:
    """Fraction(text); a certificate repeats its box bounds and constants many times (an unhashable value raises
    TypeError here, as Fraction would)."""
    return Fraction(text)


def _leaf_boxes(tree, low: list, high: list, count: int, where: str) -> tuple[list, list]:
    """Each leaf's closed box (exact bounds) in leaf order, and every node as (box, parent node, leaf number or
    None) in pre-order; refuses anything that is not a tree over the box."""
    if not isinstance(tree, list) or not tree:
        raise CertificateError(f"{where}.tree is not a non-empty list of nodes")
    boxes: list = []
    nodes: list = []
    stack = [(list(low), list(high), -1)]
    for j, node in enumerate(tree):
        at = f"{where}.tree[{j}]"
        if not stack:
            raise CertificateError(f"{at} follows a complete tree; drop it")
        node_low, node_high, parent = stack.pop()
        if isinstance(node, list) and len(node) == 2 and node[0] == "leaf":
            if node[1] != len(boxes):
                raise CertificateError(f"{at} names leaf {node[1]!r}, expected {len(boxes)} (pre-order)")
            nodes.append(((node_low, node_high), parent, len(boxes)))
            boxes.append((node_low, node_high))
            continue
        if not (isinstance(node, list) and len(node) == 3 and node[0] == "split"):
            raise CertificateError(f"{at}={node!r} is not a node")
        _, dim, threshold = node
        if type(dim) is not int or not 0 <= dim < len(low) or type(threshold) is not float:
            raise CertificateError(f"{at}: the input must be an index and the threshold a float")
        t = Fraction(threshold)
        if not node_low[dim] < t < node_high[dim]:
            raise CertificateError(f"{at}: threshold {threshold!r} is not strictly inside its node on input {dim}")
        low_high, high_low = list(node_high), list(node_low)
        low_high[dim], high_low[dim] = t, t
        nodes.append(((node_low, node_high), parent, None))
        stack += [(high_low, node_high, len(nodes) - 1), (node_low, low_high, len(nodes) - 1)]
    if stack:
        raise CertificateError(f"{where}.tree ends before its tree is complete")
    if len(boxes) != count:
        raise CertificateError(f"{where}: the tree has {len(boxes)} leaves but {count} leaves are listed")
    return boxes, nodes


def _leaf_bounds(ops, nodes, cache: dict) -> dict:
    """{leaf number: (lows, highs)} of every node's bounds, computed level by level down the tree, each node's
    intersected with its parent's (sound: the parent's box contains the child's).

    A node is bounded as the prover bounds a box: with the adaptive slopes
    alone, then with every slope choice, intersected (tighter bounds below
    a layer can change its adaptive slopes and leave it looser). A leaf
    gets the second pass only where its evidence needs it (`_check_disjunct`).
    `cache`: bounds by exact box, from the certificate's other trees."""
    depth = []
    for _, parent, _ in nodes:
        depth.append(0 if parent < 0 else depth[parent] + 1)
    done, found = {}, {}
    for level in range(max(depth) + 1):
        at = []
        for j in [j for j, d in enumerate(depth) if d == level]:
            hit = cache.get((tuple(nodes[j][0][0]), tuple(nodes[j][0][1])))
            if hit is not None and (hit[1] or nodes[j][2] is not None):
                done[j] = hit[0]
            else:
                at.append(j)
        for start in range(0, len(at), _CHUNK):
            part = at[start : start + _CHUNK]
            lower = np.array([[_float_down(v) for v in nodes[j][0][0]] for j in part])
            upper = np.array([[_float_up(v) for v in nodes[j][0][1]] for j in part])
            known = None
            if level:
                parents = [nodes[j][1] for j in part]
                known = tuple(
                    [np.stack([done[q][side][i] for q in parents]) for i in range(len(ops) + 1)] for side in (0, 1)
                )
            lows, highs = forward(ops, lower, upper, (), known)
            inner = np.array([nodes[j][2] is None for j in part])
            if inner.any():
                more = forward(
                    ops, lower[inner], upper[inner], known=([a[inner] for a in lows], [a[inner] for a in highs])
                )
                for a, b in zip(lows + highs, more[0] + more[1]):
                    a[inner] = b
            for row, j in enumerate(part):
                done[j] = ([a[row] for a in lows], [a[row] for a in highs])
                cache[(tuple(nodes[j][0][0]), tuple(nodes[j][0][1]))] = (done[j], bool(inner[row]))
        found.update({nodes[j][2]: done[j] for j in done if nodes[j][2] is not None})
        done = {j: b for j, b in done.items() if depth[j] == level}
    return found


def _evidence(leaf, rows: int, n_hidden: int, where: str) -> tuple:
    """(row weights (rows,), slope codes (n_hidden,): NaN adaptive, -1 parallel) of one bounds leaf."""
    if not isinstance(leaf, dict) or set(leaf) != {"bounds"} or not isinstance(leaf["bounds"], dict):
        raise CertificateError(f"{where} is not a leaf this checker reads ({{'bounds': ...}})")
    given = leaf["bounds"]
    weights, codes = np.zeros(rows), np.full(n_hidden, np.nan)
    try:
        if "row" in given:
            weights[given["row"]] = 1.0
            codes[:] = _SLOPE_CODES[given["slopes"]]
        else:
            weights[:] = np.array(given["weights"], dtype=np.float64)
            codes[np.array(given["neurons"], dtype=np.int64)] = np.array(given["slopes"], dtype=np.float64)
    except (KeyError, IndexError, TypeError, ValueError):
        raise CertificateError(f"{where}: malformed bounds evidence") from None
    if not np.all(np.isfinite(weights) & (weights >= 0.0)):
        raise CertificateError(f"{where}: row weights must be finite and >= 0")
    return weights, codes


def _refuted(ops, lows, highs, weights, codes, A, b_up, at_zero) -> tuple:
    """(refuted, bound) per leaf: a lower bound of ``weights . (A y - b)`` over its box and whether it refutes."""
    objective = weights @ A
    error = np.abs(weights) @ np.abs(A) * ((A.shape[0] + 2) * 2.0**-52) + 1e-300
    offsets = np.cumsum([0] + [lows[i].shape[1] for i, op in enumerate(ops) if op[0] == "relu"])

    def slopes(relu, low, high, parallel):
        given = codes[:, offsets[relu] : offsets[relu + 1]]
        adaptive = (high > -low).astype(np.float64)
        return np.where(np.isnan(given), adaptive, np.where(given == -1.0, parallel, given))

    bound = lower_bound(ops, lows, highs, len(ops), objective, np.arange(len(weights)), (slopes,))[0]
    magnitude = np.maximum(np.abs(lows[-1]), np.abs(highs[-1]))
    bound = np.nextafter(bound - np.nextafter(np.sum(error * magnitude, axis=1) * 1.01, np.inf), -np.inf)
    rhs = weights @ b_up + (np.abs(weights) @ np.abs(b_up)) * ((A.shape[0] + 2) * 2.0**-52) + 1e-300
    bound = np.nextafter(bound - np.nextafter(rhs, np.inf), -np.inf)
    strict_enough = np.all(at_zero[None, :] | (weights <= 0.0), axis=1)
    return (bound > 0.0) | ((bound >= 0.0) & strict_enough), bound


def _rows(rows, where: str, cache: dict) -> tuple | str:
    """(A, exact b, b rounded up, rows whose bound may reach 0) of a disjunct, or a string saying why not.

    Read once per distinct disjunct: a distillation's certificate states the
    same "decision is not t" for every cell of token t."""
    key = ("rows", repr([(row.get("coefficients"), row.get("rhs"), row.get("strict")) for row in rows]))
    if key not in cache:
        A = np.array([[float(_rational(c, where)) for c in row["coefficients"]] for row in rows], dtype=np.float64)
        exact_b = [_rational(row["rhs"], where) for row in rows]
        b_up = np.array([_float_up(b) for b in exact_b])
        at_zero = np.array([bool(row["strict"]) or Fraction(u) > b for row, u, b in zip(rows, b_up, exact_b)])
        exact = all(
            Fraction(float(a)) == _rational(c, where)
            for row, a_row in zip(rows, A)
            for c, a in zip(row["coefficients"], a_row)
        )
        cache[key] = (A, exact_b, b_up, at_zero) if exact else "a coefficient is not a float64; scale the row"
    return cache[key]


def _check_disjunct(ops, rows, leaves, boxes, nodes, n_hidden, where, cache, folder) -> str:
    """'' when every leaf refutes the disjunct's rows, else why the first one does not (bounds leaves first)."""
    read = _rows(rows, where, cache)
    if isinstance(read, str):
        return f"{where}: {read}"
    A, exact_b, b_up, at_zero = read
    exact = [k for k, leaf in enumerate(leaves) if isinstance(leaf, dict) and set(leaf) == {"z3"}]
    bounded = [k for k in range(len(leaves)) if k not in set(exact)]
    evidence = {k: _evidence(leaves[k], len(rows), n_hidden, f"{where}.leaves[{k}]") for k in bounded}
    found = _leaf_bounds(ops, nodes, cache)
    for start in range(0, len(bounded), _CHUNK):
        part = bounded[start : start + _CHUNK]
        lows = [np.stack([found[k][0][i] for k in part]) for i in range(len(ops) + 1)]
        highs = [np.stack([found[k][1][i] for k in part]) for i in range(len(ops) + 1)]
        weights = np.array([evidence[k][0] for k in part])
        codes = np.array([evidence[k][1] for k in part])
        refuted, bound = _refuted(ops, lows, highs, weights, codes, A, b_up, at_zero)
        again = np.flatnonzero(~refuted)
        if again.size:
            lower = np.array([[_float_down(v) for v in boxes[part[k]][0]] for k in again])
            upper = np.array([[_float_up(v) for v in boxes[part[k]][1]] for k in again])
            tight = forward(ops, lower, upper, known=([a[again] for a in lows], [a[again] for a in highs]))
            refuted[again], bound[again] = _refuted(ops, *tight, weights[again], codes[again], A, b_up, at_zero)
        if not refuted.all():
            k = part[int(np.argmin(refuted))]
            why = f"its bound is {bound[int(np.argmin(refuted))]:.6g}, which does not refute the disjunct"
            return f"{where}, leaf {k} ({_box_text(boxes[k])}): {why}"
    for k in exact:
        try:
            name, sha = str(leaves[k]["z3"]["file"]), leaves[k]["z3"]["sha256"]
            data = (folder / name).read_bytes()
        except (OSError, KeyError, TypeError):
            data, name, sha = b"", "?", "?"
        why = "" if hashlib.sha256(data).hexdigest() == sha else f"its query file {name} is missing or changed"
        why = why or z3_refutes(ops, rows, *boxes[k], found[k][0], found[k][1], _Z3_SECONDS)
        if why:
            return f"{where}, leaf {k} ({_box_text(boxes[k])}): {why}"
    return ""


def _box_text(box) -> str:
    return ", ".join(f"x{i} in [{float(lo):.9g}, {float(hi):.9g}]" for i, (lo, hi) in enumerate(zip(*box)))


def check_certificate(path, model) -> Checked:
    """Check the certificate at `path` against the ONNX file `model` (see the module docstring)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return _check_certificate(path, model)
    with threadpool_limits(limits=1, user_api="blas"):
        return _check_certificate(path, model)


def _check_certificate(path, model) -> Checked:
    started = time.monotonic()
    path, model = Path(path), Path(model)
    try:
        document = json.loads(path.read_text())
        model_bytes = model.read_bytes()
    except (OSError, ValueError) as error:
        raise CertificateError(
            f"{path}: cannot read it or its model {model} ({error}); give a certificate and its model"
        ) from None
    if not isinstance(document, dict) or document.get("certfsm_certificate") != FORMAT_VERSION:
        raise CertificateError(f"{path}: not a certfsm certificate of format {FORMAT_VERSION}")
    total, cache, sha = 0, {}, hashlib.sha256(model_bytes).hexdigest()

    def outcome(failure: str = "") -> Checked:
        return Checked(str(path), not failure, total, time.monotonic() - started, failure)

    if document.get("network_sha256") != sha:
        return outcome(
            f"{path}: the model {model} has SHA-256 {sha}, the certificate is about {document.get('network_sha256')}"
        )
    try:
        ops = read_model(model)
    except ModelError as error:
        raise CertificateError(str(error)) from None
    n_hidden = 0
    widths = [None]
    for op in ops:
        widths.append(op[1].shape[1] if op[0] == "matmul" else widths[-1])
        n_hidden += widths[-1] if op[0] == "relu" else 0
    try:
        for p, entry in enumerate(document["properties"]):
            stated = entry["property"]
            low = [_rational(i["lower"], f"properties[{p}].inputs") for i in stated["inputs"]]
            high = [_rational(i["upper"], f"properties[{p}].inputs") for i in stated["inputs"]]
            if len(entry["proofs"]) != len(stated["unsafe"]):
                return outcome(
                    f"property {stated['name']}: {len(stated['unsafe'])} disjuncts, {len(entry['proofs'])} proofs"
                )
            for k, (rows, proof) in enumerate(zip(stated["unsafe"], entry["proofs"])):
                where = f"property {stated['name']}, disjunct {k}"
                boxes, nodes = _leaf_boxes(proof["tree"], low, high, len(proof["leaves"]), where)
                total += len(boxes)
                failure = _check_disjunct(ops, rows, proof["leaves"], boxes, nodes, n_hidden, where, cache, path.parent)
                if failure:
                    return outcome(failure)
    except (KeyError, TypeError, IndexError) as error:
        raise CertificateError(
            f"{path}: a field is missing or of the wrong kind ({error!r}); write it as certfsm does"
        ) from None
    return outcome()


def check_report(folder) -> list[Checked]:
    """Check every certificate a report folder lists (summary.json) against the model it names.

    A verify or vnnlib report lists one per proved property; a distill
    report one for its exact cells (``cell_certificate``). Each must still
    hash as summary.json recorded it.
    """
    folder = Path(folder)
    try:
        summary = json.loads((folder / "summary.json").read_text())
        model = summary["model"]["path"]
        listed = [
            (e["certificate"], e.get("certificate_sha256"))
            for e in summary.get("properties", ())
            if e.get("certificate")
        ]
        if summary.get("cell_certificate"):
            listed.append((summary["cell_certificate"]["file"], summary["cell_certificate"]["sha256"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise CertificateError(
            f"{folder}: not a report folder with summary.json ({error}); give a report written by certfsm verify, "
            "vnnlib or distill"
        ) from None
    if not listed:
        raise CertificateError(
            f"{folder}: summary.json lists no certificate; run certfsm verify, vnnlib or distill with proofs"
        )
    results = []
    for name, recorded in listed:
        cert = folder / name
        if hashlib.sha256(cert.read_bytes() if cert.exists() else b"").hexdigest() == recorded:
            results.append(check_certificate(cert, model))
        else:
            results.append(Checked(str(cert), False, 0, 0.0, "missing or changed since summary.json hashed it"))
    return results
