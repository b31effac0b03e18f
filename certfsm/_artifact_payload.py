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

from ._verdict import VerdictRecord

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
) -> dict[str, Any]:
    """The payload of an artifact, as plain JSON types: the one writer of what `load_artifact` reads.

    The arguments are the `Artifact` fields of the same names: `spec` the
    spec document (``ControllerSpec.to_json()``), `edges` one sequence of
    bin edges per input, `proposal` (output index), `exact` (bool) and
    `allowed` (bitmask over output indices, `allowed_bitmasks`) one per
    cell in the flat C order or shaped by the bins, `certificate` the
    `VerdictRecord`s (written without their run facts). Nothing is
    checked here; `write_artifact` and `build_artifact` run the loader's
    checks on the result.
    """
    return {
        "spec": dict(spec),
        "model_sha256": model_sha256,
        "grid": {"edges": [np.asarray(row, dtype=np.float64).tolist() for row in edges], "frac_bits": list(frac_bits)},
        "table": {
            "proposal": _flat(proposal),
            "status": "".join("e" if x else "c" for x in _flat(np.asarray(exact, dtype=bool))),
            "allowed": _flat(allowed),
        },
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


def _flat(values: ArrayLike) -> list[Any]:
    flat: list[Any] = np.asarray(values).reshape(-1).tolist()
    return flat


def allowed_bitmasks(rows: Sequence[Sequence[bool]] | np.ndarray) -> np.ndarray:
    """Rows of booleans, one per cell (output k allowed) -> the artifact's integers with bit k set when k is allowed."""
    array = np.asarray(rows, dtype=bool)
    masks: np.ndarray = (array.astype(np.int64) << np.arange(array.shape[-1], dtype=np.int64)).sum(axis=-1)
    return masks
