"""The writer's encoding of an artifact payload: typed values in, plain JSON types out (format in `certfsm._artifact`).

This is the writer's own statement of the format, apart from the loader's
reading (`certfsm._artifact_reading`), and it imports nothing of it: a
rule stated wrongly here is refused by the loader or comes back from a
round trip as a value other than the one written
(tests/core/test_artifact_round_trip.py), instead of agreeing with
itself. `certfsm.write_artifact` and `certfsm.build_artifact` run the
loader's reading on what this returns, so that nothing the loader refuses
is written.

Standard library and numpy only, like the loader.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np

from ._box_tree import LeafStatus, Refinement, encode_tree
from ._errors import ArtifactError
from ._verdict import VerdictRecord

REFINEMENT_FORMAT = 1
"""The version of ``payload.table.refinement`` this writer writes."""
_STATUS = {LeafStatus.EXACT: "e", LeafStatus.CONSERVATIVE: "c", LeafStatus.UNDECIDED: "u"}

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def artifact_payload(
    *,
    spec: Mapping[str, Any],
    model_sha256: str,
    edges: Iterable[ArrayLike],
    frac_bits: Iterable[int | None],
    proposal: ArrayLike,
    exact: ArrayLike,
    allowed: ArrayLike,
    conservative: int,
    confirm_cycles: int,
    cooldown_cycles: int,
    overridable: Iterable[int],
    codes: Iterable[int],
    certificate: Iterable[VerdictRecord],
    created_by: str,
    refinement: Refinement | None = None,
) -> dict[str, Any]:
    """The payload of an artifact, as plain JSON types: the one writer of what `load_artifact` reads.

    The arguments are the `Artifact` fields of the same names: `spec` the
    spec document (``ControllerSpec.to_json()``), `edges` one sequence of
    bin edges per input, `proposal` (output index), `exact` (bool) and
    `allowed` (bitmask over output indices, `allowed_bitmasks`) one per
    cell in the flat C order or shaped by the bins, `certificate` the
    `VerdictRecord`s (written without their run facts). Nothing is
    checked here; `write_artifact` and `build_artifact` run the loader's
    checks on the result. `refinement` (None: a flat table, written
    without the field, so flat artifacts keep their bytes) adds
    ``table.refinement`` (`refinement_json`); the flat entry of a refined
    cell is the caller's to set: the conservative token, not exact, the
    cell's mask.
    """
    table: dict[str, Any] = {
        "proposal": _flat(proposal),
        "status": "".join("e" if x else "c" for x in _flat(np.asarray(exact, dtype=bool))),
        "allowed": _flat(allowed),
    }
    if refinement is not None:
        table["refinement"] = refinement_json(refinement)
    return {
        "spec": dict(spec),
        "model_sha256": model_sha256,
        "grid": {"edges": [np.asarray(row, dtype=np.float64).tolist() for row in edges], "frac_bits": list(frac_bits)},
        "table": table,
        "machine": {
            "conservative": conservative,
            "confirm_cycles": confirm_cycles,
            "cooldown_cycles": cooldown_cycles,
            "overridable": sorted(overridable),
            "codes": list(codes),
        },
        "certificate": [record.certificate_entry() for record in certificate],
        "created_by": created_by,
    }


def refinement_json(refinement: Refinement) -> dict[str, Any]:
    """``payload.table.refinement``: the refined cells (flat indices, ascending), each one's tree in canonical
    pre-order (`certfsm._box_tree.encode_tree`, leaves numbered on from tree to tree), and per leaf in that order
    its token (``proposal``), status (``status``: 'e' exact, 'c' conservative, 'u' undecided) and mask
    (``allowed``), as the flat table holds them per cell. Leaf evidence has no place in this format yet: a leaf
    that carries some is refused rather than written without it."""
    trees: list[list[list[Any]]] = []
    tokens: list[int] = []
    status: list[str] = []
    allowed: list[int] = []
    for cell, tree in zip(refinement.cells, refinement.trees):
        trees.append(encode_tree(tree, len(tokens)))
        for leaf in tree.leaves:
            if leaf.evidence is not None:
                raise ArtifactError(
                    f"cannot write the tree of cell {cell}: leaf {len(tokens)} carries evidence "
                    f"({leaf.evidence.kind}), which artifact refinement format {REFINEMENT_FORMAT} does not hold; "
                    "write its evidence beside the artifact and drop it from the leaf"
                )
            tokens.append(leaf.token)
            status.append(_STATUS[leaf.status])
            allowed.append(leaf.allowed)
    return {
        "version": REFINEMENT_FORMAT,
        "cells": list(refinement.cells),
        "trees": trees,
        "proposal": tokens,
        "status": "".join(status),
        "allowed": allowed,
    }


def _flat(values: ArrayLike) -> list[Any]:
    flat: list[Any] = np.asarray(values).reshape(-1).tolist()
    return flat


def allowed_bitmasks(rows: Sequence[Sequence[bool]] | np.ndarray) -> np.ndarray:
    """Rows of booleans, one per cell (output k allowed) -> the artifact's integers with bit k set when k is allowed."""
    array = np.asarray(rows, dtype=bool)
    masks: np.ndarray = (array.astype(np.int64) << np.arange(array.shape[-1], dtype=np.int64)).sum(axis=-1)
    return masks
