"""certfsm.checker: re-check a proof certificate without re-proving, sharing no code with the prover.

It imports numpy and onnx only: nothing of certfsm (docs/design.md, "Box
trees", "Checking"); threadpoolctl, when installed, only keeps numpy's
BLAS on one thread while it checks. The certificate format is stated in
`certfsm.verify._certificate`'s docstring; this package reads it by its
own code, so a rule stated wrongly on either side shows as a refusal.

`check_certificate(path, model)` answers `Checked`, else names the first
failing leaf and why; `check_report(folder)` checks every certificate a
report lists. `CertificateError` (a ValueError) is bad input.

Soundness argument. A property says: no x in the box B (exact rational
bounds) has outputs in the unsafe set, a union of disjuncts D_k, each a
conjunction of rows ``a . y <= b`` (``<`` when strict). It holds when,
for every k, no x in B reaches D_k. For each k the certificate gives a
tree; `_tree` re-derives each node's box from B and the splits,
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
The network is the file whose SHA-256 the certificate names, a DAG of
the operators `checker._arith` reads. The hidden neurons that evidence
names (``neurons[i]``) are numbered by the rule the prover's loader
follows: the hidden layers are the Relu nodes grouped by depth (the
largest number of Relu nodes on any path from the input to the node,
itself included), within a depth in the order of the graph's node list,
within a node in C order; Relu nodes the output does not depend on are
dropped. A wrong number can only make a proof fail, never pass.

Sharing and batches change how much is computed, not what is checked. A
property names its unsafe set and the proof of each disjunct by index
into tables written once; each is checked on that property's own box.
Bounds are computed for many boxes at once (`_arith` works row by row,
and its error bounds hold whatever order a product sums in), and a node's
bounds are kept by its parent node and its box rounded outward, the only
things they are computed from, so equal keys have equal bounds.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ._arith import ModelError, forward, hidden_widths, lower_bound, read_model
from ._exact import z3_refutes

__all__ = ["CertificateError", "Checked", "check_certificate", "check_report"]

FORMAT_VERSION = 2
_ROWS = 2**16
"""Boxes are bounded about this many hidden neurons at a time (2 048 boxes of ACAS Xu's 300 neurons cost 15% more
CPU than 256, whose temporaries stay in cache; the example's 16 neurons gain from 4 096)."""
_SLOPE_CODES = {"adaptive": np.nan, "zero": 0.0, "one": 1.0, "parallel": -1.0}
_GAMMA = 2.0**-52


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


def _number(text, where: str) -> tuple:
    """(exact value, a float at most it, a float at least it) of a number of the certificate."""
    try:
        return _read_number(text)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        raise CertificateError(f"{where}={text!r} is not an exact number written as a string") from None


@functools.lru_cache(maxsize=1 << 16)
def _read_number(text) -> tuple:
    value = Fraction(text)  # takes what Fraction takes; an unhashable value raises TypeError, as Fraction would
    x = float(value)
    exact = Fraction(x)
    return (
        value,
        float(np.nextafter(x, -np.inf)) if exact > value else x,
        float(np.nextafter(x, np.inf)) if exact < value else x,
    )


def _disjunct(rows, where: str) -> tuple | str:
    """(rows, A, b rounded up, rows whose bound may reach 0) of a disjunct, or why it cannot be checked."""
    if not isinstance(rows, list) or not rows:
        raise CertificateError(f"{where} is not a non-empty list of rows")
    coefficients = [[_number(c, where)[0] for c in row["coefficients"]] for row in rows]
    A = np.array([[float(c) for c in row] for row in coefficients], dtype=np.float64)
    exact_b = [_number(row["rhs"], where) for row in rows]
    b_up = np.array([b[2] for b in exact_b])
    at_zero = np.array([bool(row["strict"]) or Fraction(b[2]) > b[0] for row, b in zip(rows, exact_b)])
    if any(Fraction(float(c)) != c for row in coefficients for c in row):
        return "a coefficient is not a float64; scale the row"
    return rows, A, b_up, at_zero


def _tree(tree, count: int, low: list, high: list, where: str) -> list:
    """Each node of a proof's tree laid on the closed box [low, high], in pre-order, as (low, high, parent, leaf
    number or None); refused unless it is one tree with leaves 0 .. count - 1 in order, each threshold strictly
    inside its node on its input (so the leaves partition the box and none is empty)."""
    if not isinstance(tree, list) or not tree:
        raise CertificateError(f"{where}.tree is not a non-empty list of nodes")
    nodes, stack, leaves = [], [(low, high, -1)], 0
    for j, node in enumerate(tree):
        at = f"{where}.tree[{j}]"
        if not stack:
            raise CertificateError(f"{at} follows a complete tree; drop it")
        node_low, node_high, parent = stack.pop()
        if isinstance(node, list) and len(node) == 2 and node[0] == "leaf":
            if node[1] != leaves:
                raise CertificateError(f"{at} names leaf {node[1]!r}, expected {leaves} (pre-order)")
            nodes.append((node_low, node_high, parent, leaves))
            leaves += 1
            continue
        if not (isinstance(node, list) and len(node) == 3 and node[0] == "split"):
            raise CertificateError(f"{at}={node!r} is not a node")
        _, dim, t = node
        if type(dim) is not int or not 0 <= dim < len(low) or type(t) is not float or not math.isfinite(t):
            raise CertificateError(f"{at}: the input must be an index below {len(low)} and the threshold a float")
        if not node_low[dim] < Fraction(t) < node_high[dim]:
            raise CertificateError(f"{at}: threshold {t!r} is not strictly inside its node on input {dim}")
        low_high, high_low = list(node_high), list(node_low)
        low_high[dim] = high_low[dim] = Fraction(t)
        nodes.append((node_low, node_high, parent, None))
        stack += [(high_low, node_high, len(nodes) - 1), (node_low, low_high, len(nodes) - 1)]
    if stack:
        raise CertificateError(f"{where}.tree ends before its tree is complete")
    if leaves != count:
        raise CertificateError(f"{where}: the tree has {leaves} leaves but {count} are listed")
    return nodes


def _objectives(disjunct, leaves, n_hidden: int, where: str) -> tuple:
    """Per leaf of a proof on a disjunct (zeros for a z3 leaf): the objective ``w A`` in float, its rounding error
    per output, the right-hand side ``w . b`` rounded up, whether a bound of 0 refutes, and the slope codes (NaN
    adaptive, -1 parallel). The products' errors are bounded as `_arith` bounds them (``(n + 2) 2^-52 |w| |A|``)."""
    _, A, b_up, at_zero = disjunct
    weights, codes = np.zeros((len(leaves), len(b_up))), np.full((len(leaves), n_hidden), np.nan)
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, dict) and set(leaf) == {"z3"}:
            continue
        if not isinstance(leaf, dict) or set(leaf) != {"bounds"} or not isinstance(leaf["bounds"], dict):
            raise CertificateError(f"{where}.leaves[{k}] is not a leaf this checker reads ({{'bounds': ...}})")
        given = leaf["bounds"]
        try:
            if "row" in given:
                weights[k, given["row"]] = 1.0
                codes[k] = _SLOPE_CODES[given["slopes"]]
            else:
                weights[k] = np.array(given["weights"], dtype=np.float64)
                codes[k, np.array(given["neurons"], dtype=np.int64)] = np.array(given["slopes"], dtype=np.float64)
        except (KeyError, IndexError, TypeError, ValueError):
            raise CertificateError(f"{where}.leaves[{k}]: malformed bounds evidence for {len(b_up)} rows") from None
    if not np.all(np.isfinite(weights) & (weights >= 0.0)):
        raise CertificateError(f"{where}: row weights must be finite and >= 0")
    gamma = (len(b_up) + 2) * _GAMMA
    error = np.abs(weights) @ np.abs(A) * gamma + 1e-300
    rhs = np.nextafter(weights @ b_up + (weights @ np.abs(b_up)) * gamma + 1e-300, np.inf)
    return weights @ A, error, rhs, np.all(at_zero[None, :] | (weights <= 0.0), axis=1), codes


def _refuted(ops, lows, highs, objective, error, rhs, strict_enough, codes) -> tuple:
    """(refuted, bound) per box: a lower bound of ``w . (A y - b)`` over it (see `_objectives`) and whether it
    refutes the disjunct."""
    bound = lower_bound(ops, lows, highs, len(ops), objective, np.arange(len(objective)), (codes,))[0]
    magnitude = np.maximum(np.abs(lows[-1]), np.abs(highs[-1]))
    bound = np.nextafter(bound - np.nextafter(np.sum(error * magnitude, axis=1) * 1.01, np.inf), -np.inf)
    bound = np.nextafter(bound - rhs, -np.inf)
    return (bound > 0.0) | ((bound >= 0.0) & strict_enough), bound


class _Plan:
    """Every node of every tree, kept once per (parent, box rounded outward), and every leaf to refute with its
    place in the certificate, (property, disjunct, 1 for a bounds leaf or 2 for a z3 leaf, leaf): a failure is
    reported at the first place, bounds leaves of a disjunct before its z3 leaves."""

    def __init__(self):
        self.keys, self.low, self.high, self.parent, self.depth, self.inner = {}, [], [], [], [], []
        self.order, self.node, self.objective, self.box, self.z3, self.table = [], [], [], [], [], ()
        self.chunk = 0

    def add_node(self, low: tuple, high: tuple, parent: int, inner: bool) -> int:
        at = self.keys.setdefault((parent, low, high), len(self.low))
        if at == len(self.low):
            self.low.append(low), self.high.append(high), self.parent.append(parent), self.inner.append(inner)
            self.depth.append(0 if parent < 0 else self.depth[parent] + 1)
        self.inner[at] |= inner
        return at


def _plan(document, n_hidden: int) -> tuple:
    """(the plan, failures found on reading, leaves, property names); each shared unsafe set and evidence is read
    once, and each tree is laid on the box of every property that uses it."""
    sets = [
        [_disjunct(rows, f"unsafe_sets[{u}][{k}]") for k, rows in enumerate(disjuncts)]
        for u, disjuncts in enumerate(document["unsafe_sets"])
    ]
    proofs, bases, table, rows, plan, failures, leaves, names = document["proofs"], {}, [], 0, _Plan(), [], 0, []
    plan.chunk = min(4096, max(128, _ROWS // max(1, n_hidden)))
    for p, entry in enumerate(document["properties"]):
        names.append(entry["name"])
        where = f"property {entry['name']}"
        bounds = [(_number(lo, f"{where}: inputs"), _number(hi, f"{where}: inputs")) for lo, hi in entry["inputs"]]
        whole = [lo[0] for lo, _ in bounds], [hi[0] for _, hi in bounds]
        root = plan.add_node(tuple(lo[1] for lo, _ in bounds), tuple(hi[2] for _, hi in bounds), -1, False)
        u, refs = entry["unsafe"], entry["proofs"]
        for key, value, table_name, size in [("unsafe", u, "unsafe_sets", len(sets))] + [
            ("proofs", j, "proofs", len(proofs)) for j in refs
        ]:
            if type(value) is not int or not 0 <= value < size:
                raise CertificateError(f"{where}: {key}={value!r} names no entry of {table_name} (it has {size})")
        if len(refs) != len(sets[u]):
            failures.append(((p, -1, 0, 0), None, f"{len(sets[u])} disjuncts, {len(refs)} proofs"))
            continue
        for k, j in enumerate(refs):
            if isinstance(sets[u][k], str):
                failures.append(((p, k, 0, 0), None, sets[u][k]))
                continue
            evidence = proofs[j]["leaves"]
            if (u, k, j) not in bases:
                bases[u, k, j], rows = rows, rows + len(evidence)
                table.append(_objectives(sets[u][k], evidence, n_hidden, f"proofs[{j}]"))
            at = [(root, whole)]
            if proofs[j]["tree"] != [["leaf", 0]] or len(evidence) != 1:
                ids, at = [], []
                for low, high, parent, leaf in _tree(proofs[j]["tree"], len(evidence), *whole, f"{where}: proofs[{j}]"):
                    outward = tuple(_read_number(v)[1] for v in low), tuple(_read_number(v)[2] for v in high)
                    ids.append(
                        plan.add_node(*outward, ids[parent] if parent >= 0 else -1, leaf is None and parent >= 0)
                    )
                    at += [(ids[-1], (low, high))] if leaf is not None else []
            leaves += len(at)
            for leaf, (node, box) in enumerate(at):
                if "z3" in evidence[leaf]:  # each leaf is {"z3": ...} or {"bounds": ...} (`_objectives`)
                    plan.z3.append(((p, k, 2, leaf), node, evidence[leaf], sets[u][k][0], box))
                else:
                    plan.order.append((p, k, 1, leaf)), plan.node.append(node), plan.box.append(box)
                    plan.objective.append(bases[u, k, j] + leaf)
    if table:
        plan.table = tuple(np.concatenate([t[i] for t in table]) for i in range(5))
    return plan, failures, leaves, names


def _bounds(ops, plan: _Plan) -> tuple:
    """Each node's box rounded outward, and its bounds computed level by level down the trees, each intersected
    with its parent's (sound: the parent's box contains the child's). A node is bounded as the prover bounds a box:
    with the adaptive slopes alone, then, for an inner node below the root, with every slope choice, intersected
    (the prover tightens the boxes it keeps splitting, not the one it starts from; and tighter bounds below a layer
    can change its adaptive or parallel slopes and leave a child looser, so the checker follows it); a leaf gets the
    second pass only where its evidence needs it (`_first_bounds_failure`)."""
    low, high, parent = np.array(plan.low), np.array(plan.high), np.array(plan.parent)
    depth, inner = np.array(plan.depth), np.array(plan.inner)
    lows = highs = None
    for level in range(int(depth.max()) + 1):
        at_level = np.flatnonzero(depth == level)
        for ids in np.array_split(at_level, -(-len(at_level) // plan.chunk)):
            known = None if not level else ([a[parent[ids]] for a in lows], [a[parent[ids]] for a in highs])
            new = forward(ops, low[ids], high[ids], (), known)
            again = inner[ids]
            if again.any():
                more = forward(ops, low[ids][again], high[ids][again], known=[[a[again] for a in s] for s in new])
                for a, b in zip(new[0] + new[1], more[0] + more[1]):
                    a[again] = b
            if lows is None:
                lows, highs = ([np.empty((len(low), a.shape[1])) for a in side] for side in new)
            for a, b in zip(lows + highs, new[0] + new[1]):
                a[ids] = b
    return low, high, lows, highs


def _first_bounds_failure(ops, plan: _Plan, node_bounds: tuple) -> tuple | None:
    """(index, bound) of the first bounds leaf whose bound does not refute its disjunct, else None; a leaf that its
    node's bounds leave open is tried again with every slope choice on its own box."""
    low, high, lows, highs = node_bounds
    node, objective = np.array(plan.node, dtype=np.int64), np.array(plan.objective, dtype=np.int64)
    for start in range(0, len(node), plan.chunk):
        part = slice(start, start + plan.chunk)
        nodes, terms = node[part], [t[objective[part]] for t in plan.table]
        mine = [a[nodes] for a in lows], [a[nodes] for a in highs]
        refuted, bound = _refuted(ops, *mine, *terms)
        again = np.flatnonzero(~refuted)
        if again.size:
            tight = forward(ops, low[nodes[again]], high[nodes[again]], known=[[a[again] for a in s] for s in mine])
            refuted[again], bound[again] = _refuted(ops, *tight, *[t[again] for t in terms])
        if not refuted.all():
            return start + int(np.argmin(refuted)), bound[int(np.argmin(refuted))]
    return None


def check_certificate(path, model) -> Checked:
    """Check the certificate at `path` against the ONNX file `model` (see the module docstring)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return _check_certificate(Path(path), Path(model))
    with threadpool_limits(limits=1, user_api="blas"):
        return _check_certificate(Path(path), Path(model))


def _check_certificate(path: Path, model: Path) -> Checked:
    started = time.monotonic()
    try:
        document, sha = json.loads(path.read_text()), hashlib.sha256(model.read_bytes()).hexdigest()
    except (OSError, ValueError) as error:
        raise CertificateError(f"{path}: cannot read it or its model {model} ({error}); give both") from None
    version = document.get("certfsm_certificate") if isinstance(document, dict) else None
    if version != FORMAT_VERSION:
        raise CertificateError(
            f"{path}: certfsm_certificate={version!r}, this checker reads format {FORMAT_VERSION}; write the "
            "certificate again with this certfsm (verify --report, vnnlib --certificate or distill --report)"
        )
    if document.get("network_sha256") != sha:
        why = f"{path}: the model {model} has SHA-256 {sha}, the certificate is about {document.get('network_sha256')}"
        return Checked(str(path), False, 0, time.monotonic() - started, why)
    try:
        ops = read_model(model)
        plan, failures, leaves, names = _plan(document, sum(hidden_widths(ops)))
        node_bounds = _bounds(ops, plan) if plan.low else None
        found = _first_bounds_failure(ops, plan, node_bounds) if plan.node else None
    except (KeyError, TypeError, IndexError, ValueError) as error:
        if isinstance(error, (CertificateError, ModelError)):
            raise CertificateError(str(error)) from None
        raise CertificateError(
            f"{path}: a field is missing or of the wrong kind ({error!r}); write it as certfsm does"
        ) from None
    if found is not None:
        why = f"its bound is {found[1]:.6g}, which does not refute the disjunct"
        failures.append((plan.order[found[0]], plan.box[found[0]], why))
    first = min(failures, default=None, key=lambda failure: failure[0])
    for order, node, leaf, rows, box in plan.z3:  # in the certificate's order, up to its first other failure
        if first is not None and order > first[0]:
            break
        why = z3_refutes(leaf, path.parent, ops, rows, box, *([a[node] for a in side] for side in node_bounds[2:]))
        if why:
            first = (order, box, why)
            break
    if first is None:
        return Checked(str(path), True, leaves, time.monotonic() - started)
    (p, k, _, leaf), box, why = first
    where = f"property {names[p]}" + (f", disjunct {k}" if k >= 0 else "")
    if box is not None:
        where += (
            f", leaf {leaf} ("
            + ", ".join(f"x{i} in [{float(a):.9g}, {float(b):.9g}]" for i, (a, b) in enumerate(zip(*box)))
            + ")"
        )
    return Checked(str(path), False, leaves, time.monotonic() - started, f"{where}: {why}")


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
