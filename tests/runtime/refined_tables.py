"""A refined artifact made from a certified flat one in the test: random box trees under some of its cells.

Each refined cell is split at random on the inputs' fixed-point grid (a
float64 threshold on an input without frac_bits), its leaves given the
masks the spec's rules give their boxes (`certfsm.leaf_allowed_mask`)
and random allowed tokens (exact) or the conservative token, its own
flat entry the conservative token; the core's writer and loader check
the result as they check any artifact.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path

from certfsm import Box, TreeBudget, leaf_allowed_mask, load_artifact, write_artifact
from certfsm.machine import Machine

BUDGET = TreeBudget(max_depth=3, max_leaves=6)


def refined_artifact(flat: Path, out: Path, seed: int = 0, share: float = 0.5) -> Path:
    """Write to `out` the artifact `flat` with about `share` of its cells refined (seeded); returns `out`."""
    artifact = load_artifact(flat)
    machine = Machine.from_artifact(artifact)
    payload = json.loads(json.dumps(artifact.payload()))
    rng = random.Random(seed)
    spec = artifact.stored_spec
    rules = [(r.lower, r.upper, r.forbidden) for r in spec.rules]
    legal = sum(1 << t for t in spec.legal)
    conservative = machine.params.conservative
    cells, trees, proposal, status, allowed = [], [], [], [], []
    for cell in range(machine.n_cells):
        if rng.random() >= share:
            continue
        lower, upper = machine.cell_bounds(cell)
        box = Box.of_bounds(lower, upper, [hi == e[-1] for hi, e in zip(upper, machine.edges)])
        encoded: list = []
        leaves: list = []

        def grow(box: Box, depth: int) -> None:
            threshold = None
            if depth < BUDGET.max_depth and len(leaves) + (BUDGET.max_depth - depth) < BUDGET.max_leaves:
                threshold = _threshold(box, machine.frac_bits, rng) if depth == 0 or rng.random() < 0.6 else None
            if threshold is None:
                mask = leaf_allowed_mask(box, legal, rules)
                token = rng.choice([t for t in range(machine.params.n_tokens) if mask >> t & 1])
                encoded.append(["leaf", len(proposal) + len(leaves)])
                leaves.append(
                    (token, "e" if token != conservative or rng.random() < 0.5 else "cu"[rng.random() < 0.5], mask)
                )
                return
            i, t = threshold
            bits = machine.frac_bits[i]
            encoded.append(["split", i, int(t * (1 << bits)) if bits is not None else float(t)])
            low, high = box.split(i, t)
            grow(low, depth + 1)
            grow(high, depth + 1)

        grow(box, 0)
        if len(leaves) < 2:
            continue
        cells.append(cell)
        trees.append(encoded)
        for token, kind, mask in leaves:
            proposal.append(token)
            status.append(kind)
            allowed.append(mask)
        payload["table"]["proposal"][cell] = conservative
        payload["table"]["status"] = payload["table"]["status"][:cell] + "c" + payload["table"]["status"][cell + 1 :]
    payload["spec"]["refine"] = {"max_depth": BUDGET.max_depth, "max_leaves": BUDGET.max_leaves}
    payload["table"]["refinement"] = {
        "version": 1,
        "cells": cells,
        "trees": trees,
        "proposal": proposal,
        "status": "".join(status),
        "allowed": allowed,
    }
    write_artifact(out, payload)
    return out


def _threshold(box: Box, frac_bits, rng: random.Random) -> tuple[int, Fraction] | None:
    """A random split (input, threshold) strictly inside `box`, on the input's grid; None when none fits."""
    order = list(range(len(box.intervals)))
    rng.shuffle(order)
    for i in order:
        side, bits = box.intervals[i], frac_bits[i]
        if bits is None:
            t = Fraction(float(side.low + (side.high - side.low) * Fraction(rng.randint(1, 7), 8)))
        else:
            scale = 1 << bits
            low, high = math.floor(side.low * scale) + 1, math.ceil(side.high * scale) - 1
            if low > high:
                continue
            t = Fraction(rng.randint(low, high), scale)
        if side.low < t < side.high:
            return i, t
    return None
