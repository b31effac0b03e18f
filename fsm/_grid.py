"""The grid: the spec's bins, their product cells, and the integer path the hardware uses, vectorised.

The distillation bins millions of points at once with numpy; the runtime
bins one reading at a time with the standard library
(`certfsm.machine.Machine.cell_of`). Both follow the rule below and share
the fixed-point thresholds (`certfsm.machine.integer_thresholds`); a test
holds them equal.

A cell is a product of one bin per input. Every bin is half-open
[lo, hi) except the last bin of each input, which is closed [lo, max], so
the cells partition the envelope exactly: each point of the envelope lies
in exactly one cell. Cells are numbered in C order (the last input varies
fastest), the order of ``np.ravel_multi_index``. A point outside the
envelope, NaN or inf has no cell: `cell_of` returns `OUT_OF_ENVELOPE`.

The binning rule in one line: bin(x_i) = the number of interior edges e
with x_i >= e, i.e. ``np.searchsorted(interior, x_i, side="right")``
(`certfsm.fast_binning.RowBinning` does it for every decoder);
the closed last bin needs no special case because every interior edge is
below max. Edges are the exact decimals the spec wrote
(docs/semantics.md, "Cells"), so a float reading is compared with the
smallest float64 t >= e (x >= t exactly when x >= e) and with the
largest float64 <= max (`float_keys`).

Three views of a cell's box, each for its use: `cell_bounds` gives the
spec's edges (the decimals, carried as floats, which compare exactly with
each other and with rule bounds); `exact_cell_bounds` their rationals, for
properties; `proof_cells_bounds` the float64 box rounded outward around
them, which bound propagation may cover; `float_cell_bounds` the closed
box of the float64 points inside the half-open cell, where witnesses live.

Fixed point (docs/semantics.md, "Fixed point"): an input with
``frac_bits`` f reaches the hardware as an integer v meaning v * 2^-f.
Each edge e becomes the integer threshold ceil(e * 2^f), computed from
the exact rational value of the float edge, so v >= ceil(e * 2^f) exactly
when v * 2^-f >= e, and the integer binning (`cell_of_fixed`) equals the
real binning of v * 2^-f. The envelope's upper end is the one place where
the comparison is <=, so its integer limit is floor(max * 2^f).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from certfsm import SpecError, decimal_value, float_at_least, float_at_most, frozen_array
from certfsm.fast_binning import RowBinning
from certfsm.machine import OUT_OF_ENVELOPE, integer_envelope, integer_thresholds, reading_keys

_INT64 = np.iinfo(np.int64)


@dataclass(frozen=True, eq=False)
class Grid:
    """Bin edges per input; `n_cells` cells in C order.

    Invariants: one float64 edge array per input, read-only, at least two
    finite, strictly increasing entries; `names` and `frac_bits` have one
    entry per input; each frac_bits is None (no fixed-point path) or an
    integer 0..24. Two grids are equal when names, frac_bits and every
    edge are equal.
    """

    edges: tuple[np.ndarray, ...]
    names: tuple[str, ...]
    frac_bits: tuple[int | None, ...]

    def __post_init__(self) -> None:
        edges = tuple(frozen_array(np.asarray(e, dtype=np.float64)) for e in self.edges)
        names = tuple(str(n) for n in self.names)
        frac_bits = tuple(None if f is None else int(f) for f in self.frac_bits)
        if not edges:
            raise SpecError("Grid: no inputs were given; a grid needs at least one input with its edges")
        if len(names) != len(edges) or len(frac_bits) != len(edges):
            raise SpecError(
                f"Grid: {len(edges)} edge arrays but {len(names)} names and {len(frac_bits)} frac_bits; "
                "give one name and one frac_bits (or None) per input"
            )
        for i, (name, e, f) in enumerate(zip(names, edges, frac_bits)):
            if e.ndim != 1 or e.size < 2 or not np.all(np.isfinite(e)) or not np.all(np.diff(e) > 0):
                raise SpecError(
                    f"Grid: edges of inputs[{i}] ({name}) = {e.tolist()} are not at least two finite, "
                    "strictly increasing numbers; fix the edges"
                )
            if f is not None and not 0 <= f <= 24:
                raise SpecError(f"Grid: frac_bits of inputs[{i}] ({name}) = {f} is outside 0..24; use 0..24 or None")
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "frac_bits", frac_bits)

    @classmethod
    def from_spec(cls, spec) -> "Grid":
        """The grid of a `ControllerSpec`: its materialised edges, input names and frac_bits."""
        return cls(
            tuple(np.array(item.edges) for item in spec.inputs),
            tuple(item.name for item in spec.inputs),
            tuple(item.frac_bits for item in spec.inputs),
        )

    def __eq__(self, other) -> bool:
        if not isinstance(other, Grid):
            return NotImplemented
        return (
            self.names == other.names
            and self.frac_bits == other.frac_bits
            and len(self.edges) == len(other.edges)
            and all(np.array_equal(a, b) for a, b in zip(self.edges, other.edges))
        )

    def __hash__(self) -> int:
        return hash((self.names, self.frac_bits, tuple(e.tobytes() for e in self.edges)))

    @property
    def n_inputs(self) -> int:
        return len(self.edges)

    @property
    def shape(self) -> tuple[int, ...]:
        """Bins per input."""
        return tuple(e.size - 1 for e in self.edges)

    @property
    def n_cells(self) -> int:
        return math.prod(self.shape)

    @property
    def lower(self) -> np.ndarray:
        """The envelope's lower corner (the first edges)."""
        return frozen_array([e[0] for e in self.edges])

    @property
    def upper(self) -> np.ndarray:
        """The envelope's upper corner (the last edges)."""
        return frozen_array([e[-1] for e in self.edges])

    @property
    def float_envelope(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper): the closed box of the float64 readings inside the envelope read exactly. A decimal end
        such as -0.1 has its float64 outside it, so drawing from (`lower`, `upper`) instead of the decimal ends
        never gives a reading the table bins to no cell."""
        return (
            frozen_array([up[0] for _, up in self._rounded_edges]),
            frozen_array([down[-1] for down, _ in self._rounded_edges]),
        )

    # ------------------------------------------------------------ real inputs

    def _rows(self, x, what: str, dtype) -> tuple[np.ndarray, bool]:
        """x as a (m, n_inputs) array and whether a single point was given; refuses a wrong length."""
        try:
            array = np.asarray(x, dtype=dtype)
        except (TypeError, ValueError):
            raise SpecError(
                f"{what}: got {x!r:.60}, expected numbers: one value per input "
                f"({', '.join(self.names)}) or rows of them"
            ) from None
        if array.ndim not in (1, 2) or array.shape[-1] != self.n_inputs:
            raise SpecError(
                f"{what}: got an array of shape {array.shape}, expected ({self.n_inputs},) or "
                f"(m, {self.n_inputs}): one value per input ({', '.join(self.names)}) in that order"
            )
        return array.reshape(-1, self.n_inputs), array.ndim == 1

    @functools.cached_property
    def float_keys(self) -> tuple[tuple[float, np.ndarray, float], ...]:
        """Per input (low, interior, high) with a float x in bin k exactly as the decimal edges say
        (`certfsm.machine.reading_keys`): inside when low <= x <= high, bin = #interior keys <= x."""
        return tuple(
            (low, np.array(interior, dtype=np.float64), high)
            for low, interior, high in (reading_keys(e) for e in self.edges)
        )

    def cell_of(self, x):
        """Flat cell index of one point (an int) or of a batch of rows (an int64 array); -1 outside the envelope.

        The runtime's vectorised binning (`certfsm.fast_binning.RowBinning`), so the distiller's cells and the
        runtime's are one rule."""
        rows, single = self._rows(x, "cell_of", np.float64)
        cells = self._row_binning.cells(rows)
        return int(cells[0]) if single else cells

    @functools.cached_property
    def _row_binning(self) -> RowBinning:
        return RowBinning(self.edges, self.shape)

    def _flat(self, bins: np.ndarray, inside: np.ndarray, single: bool):
        cells = np.full(bins.shape[0], OUT_OF_ENVELOPE, dtype=np.int64)
        if inside.any():
            cells[inside] = np.ravel_multi_index(tuple(bins[inside].T), self.shape)
        return int(cells[0]) if single else cells

    def cell_index(self, multi_index) -> int:
        """Flat index of a cell given one bin index per input."""
        return int(np.ravel_multi_index(tuple(int(k) for k in multi_index), self.shape))

    def multi_index(self, index: int) -> tuple[int, ...]:
        """One bin index per input of flat cell `index`."""
        self._require_cell(index)
        return tuple(int(k) for k in np.unravel_index(int(index), self.shape))

    def _require_cell(self, index) -> None:
        if not 0 <= int(index) < self.n_cells:
            raise SpecError(
                f"cell index {index} is outside 0..{self.n_cells - 1} of a grid with shape "
                f"{self.shape}; use an index from cell_of"
            )

    def cell_bounds(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper) corners of cell `index`; the cell is [lower, upper) except that
        upper[i] == max of input i means that side is closed."""
        bins = self.multi_index(index)
        lower = np.array([e[k] for e, k in zip(self.edges, bins)])
        upper = np.array([e[k + 1] for e, k in zip(self.edges, bins)])
        return lower, upper

    def cells_bounds(self, cells) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper), each (len(cells), n_inputs): the corners of many cells at once (`cell_bounds`
        vectorised); the indices must be cells of this grid."""
        bins = np.unravel_index(np.asarray(cells, dtype=np.int64), self.shape)
        lower = np.stack([e[b] for e, b in zip(self.edges, bins)], axis=1)
        upper = np.stack([e[b + 1] for e, b in zip(self.edges, bins)], axis=1)
        return lower, upper

    @functools.cached_property
    def _rounded_edges(self) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
        """Per input, every edge's decimal rounded down and rounded up to float64."""
        return tuple(
            (
                np.array([float_at_most(decimal_value(v)) for v in e]),
                np.array([float_at_least(decimal_value(v)) for v in e]),
            )
            for e in self.edges
        )

    def proof_cells_bounds(self, cells) -> tuple[np.ndarray, np.ndarray]:
        """`cells_bounds` rounded outward: float64 boxes that contain every real point of the cells' exact boxes."""
        bins = np.unravel_index(np.asarray(cells, dtype=np.int64), self.shape)
        lower = np.stack([down[b] for (down, _), b in zip(self._rounded_edges, bins)], axis=1)
        upper = np.stack([up[b + 1] for (_, up), b in zip(self._rounded_edges, bins)], axis=1)
        return lower, upper

    def exact_cell_bounds(self, index: int) -> tuple[tuple, tuple]:
        """(lower, upper) of cell `index` as the exact rationals of its decimal edges (the closed box)."""
        lower, upper = self.cell_bounds(index)
        return tuple(decimal_value(v) for v in lower), tuple(decimal_value(v) for v in upper)

    def exact_envelope(self) -> tuple[tuple, tuple]:
        """(lower, upper) of the envelope as exact rationals."""
        return tuple(decimal_value(e[0]) for e in self.edges), tuple(decimal_value(e[-1]) for e in self.edges)

    def float_cell_bounds(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """The closed box of the float64 points in the half-open cell `index` (empty where lower > upper)."""
        bins = self.multi_index(index)
        lower, upper = [], []
        for (low, interior, high), k, n in zip(self.float_keys, bins, self.shape):
            lower.append(low if k == 0 else float(interior[k - 1]))
            upper.append(high if k == n - 1 else float(np.nextafter(interior[k], -np.inf)))
        return np.array(lower), np.array(upper)

    def all_cell_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower, upper), each (n_cells, n_inputs): the corners of every cell in flat-index order."""
        return self.cells_bounds(np.arange(self.n_cells))

    def describe_cell(self, index: int) -> str:
        """Human-readable bounds of a cell, e.g. ``temperature in [85, 95)``, for messages and reports."""
        lower, upper = self.cell_bounds(index)
        parts = []
        for name, lo, hi, e in zip(self.names, lower, upper, self.edges):
            close = "]" if hi == e[-1] else ")"
            parts.append(f"{name} in [{lo:g}, {hi:g}{close}")
        return ", ".join(parts)

    # ------------------------------------------------------- fixed-point path

    def _require_fixed_point(self) -> None:
        for i, (name, f) in enumerate(zip(self.names, self.frac_bits)):
            if f is None:
                raise SpecError(
                    f"inputs[{i}] ({name}) has no frac_bits, so the grid has no fixed-point path; "
                    "add frac_bits (0..24) to that input in the spec"
                )

    def integer_thresholds(self) -> tuple[tuple[int, ...], ...]:
        """Per input, ceil(e * 2^f) for every edge e (first and last included), from the exact value of e.

        Raises SpecError when an input has no frac_bits or a threshold
        does not fit in int64.
        """
        self._require_fixed_point()
        result = []
        for name, e, f in zip(self.names, self.edges, self.frac_bits):
            thresholds = integer_thresholds(e, f)
            self._require_int64(name, thresholds)
            result.append(thresholds)
        return tuple(result)

    def integer_envelope(self) -> tuple[tuple[int, int], ...]:
        """Per input, the integers (lo, hi) with v inside the envelope exactly when lo <= v <= hi:
        lo = ceil(min * 2^f) and hi = floor(max * 2^f)."""
        self._require_fixed_point()
        result = []
        for name, e, f in zip(self.names, self.edges, self.frac_bits):
            limits = integer_envelope(e, f)
            self._require_int64(name, limits)
            result.append(limits)
        return tuple(result)

    @staticmethod
    def _require_int64(name: str, values) -> None:
        if any(not _INT64.min <= v <= _INT64.max for v in values):
            raise SpecError(
                f"input {name}: a fixed-point threshold does not fit in int64; "
                "lower frac_bits or the range of that input"
            )

    def cell_of_fixed(self, v):
        """`cell_of` for fixed-point integers v (v[i] means v[i] * 2^-frac_bits[i]), by integer compares only.

        Takes one integer vector or a batch of rows; floats are refused,
        since the hardware never sees them.
        """
        array = np.asarray(v)
        if array.dtype.kind not in "iu" or (array.dtype.kind == "u" and array.size and array.max() > _INT64.max):
            raise SpecError(
                f"cell_of_fixed: got values of dtype {array.dtype}, expected integers that fit in "
                "int64 (v means v * 2^-frac_bits); convert the readings to fixed point first"
            )
        rows, single = self._rows(array, "cell_of_fixed", np.int64)
        inside = np.ones(rows.shape[0], dtype=bool)
        bins = np.empty(rows.shape, dtype=np.int64)
        for i, (interior, lo, hi) in enumerate(self._fixed_point_tables):
            column = rows[:, i]
            inside &= (column >= lo) & (column <= hi)
            bins[:, i] = np.searchsorted(interior, column, side="right")
        return self._flat(bins, inside, single)

    @functools.cached_property
    def _fixed_point_tables(self) -> tuple[tuple[np.ndarray, int, int], ...]:
        """Per input: the interior integer thresholds (int64) and the integer envelope."""
        return tuple(
            (np.array(t[1:-1], dtype=np.int64), lo, hi)
            for t, (lo, hi) in zip(self.integer_thresholds(), self.integer_envelope())
        )
