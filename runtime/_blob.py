"""The reading blob: one reading of up to five inputs in 16 bytes, with a version and a checksum.

Meant for places where a reading must be small and self-checking: a
register window, a radio frame, a compact log record. Byte layout
(multi-byte fields little-endian)::

    offset  size  field
    0       1     version: 1
    1       1     n: number of inputs, 1..5
    2       10    five signed 16-bit slots; slot k holds input k (spec order); slots n..4 are 0
    12      4     CRC-32 (zlib.crc32) of the layout key, then of bytes 0..11

The layout key (the input names and frac_bits, as JSON) enters the
checksum without taking space, so a blob read with another spec's layout
fails the check instead of decoding into wrong numbers. CRC-32 detects
every single-bit error and every burst of up to 32 bits; it is a guard
against damage, not a signature against forgery.

A slot holds a fixed-point code, the hardware's own format
(docs/semantics.md, "Fixed point"): code v means v * 2^-f, f being the
input's frac_bits. Four codes are reserved: -32768 missing, -32767 NaN,
-32766 -inf, +32767 +inf; finite values use -32765..32766. An input
whose spec gives no frac_bits gets the finest f (at most 24) that holds
twice its envelope's magnitude.

Precision: a finite value x is stored as v = floor(x * 2^f), so the
decoded value is the largest multiple of 2^-f not above x (an error
below 2^-f: 1/64 for the example's utilisation inputs with f = 6, 1/16
degC for its temperature with f = 4, none for its integer queue depth
with f = 0), except where that would cross a bin edge. A layout built
from a spec knows the edges, the exact decimals written
(docs/semantics.md, "Cells"), and keeps every reading in its cell: x in
bin [e_k, e_k+1) is stored as max(floor(x * 2^f), ceil(e_k * 2^f)),
which lies in the same bin (and so inside every rule box that holds the
whole bin's readings as the cell does) because the layout is refused
unless every bin holds a multiple of 2^-f. With edges on the grid (as in
the example) that maximum is always the floor. A value above max is
stored as at least the code after max, so it stays out of the envelope;
a value below min decodes below min. A refined table's splits on an
input with frac_bits lie on the same grid, so rounding down keeps a
reading in its leaf too where that input's edges are on the grid
(docs/semantics.md, "Cells"). Every comparison is exact: a float,
an int, a Fraction or a Decimal is placed by its exact value, never
rounded first.

A finite value outside the codes' range (-32765 * 2^-f <= x < 32767 *
2^-f: about +-512 with f = 6, +-2048 with f = 4) is refused with a
ProbeError naming the input; it is never wrapped or clipped silently.
Every layout holds its whole envelope and a code beyond it, or it is
refused when it is built.
"""

from __future__ import annotations

import bisect
import decimal
import json
import math
import numbers
import struct
import zlib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Iterable, Protocol, Sequence

from certfsm import ProbeError, decimal_value
from certfsm.machine import exact_reading_value

BLOB_VERSION = 1
BLOB_SIZE = 16
MAX_INPUTS = 5
MAX_FRAC_BITS = 24

MISSING, NAN, NEG_INF, POS_INF = -32768, -32767, -32766, 32767
FINITE_MIN, FINITE_MAX = -32765, 32766

_BODY = struct.Struct("<BB5h")
_CRC = struct.Struct("<I")


def _finest_frac_bits(low: float, high: float) -> int:
    """The largest f <= 24 at which twice the envelope's magnitude still fits, so readings beyond it fit too."""
    magnitude = 2 * max(abs(low), abs(high))
    f = MAX_FRAC_BITS
    while f > 0 and math.ldexp(magnitude, f) > FINITE_MAX:
        f -= 1
    return f


def _show_exact(value: object) -> str:
    text = repr(value) if isinstance(value, float) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _show(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


class InputRange(Protocol):
    """What `BlobLayout.for_inputs` reads of an input (a spec's `InputSpec` has it; so may any object)."""

    @property
    def name(self) -> str: ...

    @property
    def min(self) -> float: ...

    @property
    def max(self) -> float: ...

    @property
    def frac_bits(self) -> int | None: ...


_Cuts = tuple[tuple[tuple[Fraction, ...], tuple[int, ...]], ...]
"""Per input: the interior edges' exact values and, per bin, the least code inside it (`BlobLayout._bin_codes`)."""


@dataclass(frozen=True)
class BlobLayout:
    """Which inputs a blob carries, in order, with each one's frac_bits and envelope [lower, upper].

    Build it from a spec with `BlobLayout.for_inputs(spec.inputs)`.
    """

    names: tuple[str, ...]
    frac_bits: tuple[int, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    edges: tuple[tuple[float, ...], ...] = ()
    """Per input the spec's bin edges (first min, last max); () for a layout that only carries values."""
    _seed: int = field(init=False, repr=False, compare=False)
    _cuts: _Cuts = field(init=False, repr=False, compare=False)

    @classmethod
    def for_inputs(cls, inputs: Iterable[InputRange]) -> "BlobLayout":
        """The layout of a spec's inputs (objects with name, min, max and frac_bits, such as `InputSpec`); with
        their edges too, it keeps every reading in its cell."""
        inputs = tuple(inputs)
        return cls(
            tuple(item.name for item in inputs),
            tuple(
                _finest_frac_bits(item.min, item.max) if item.frac_bits is None else item.frac_bits for item in inputs
            ),
            tuple(item.min for item in inputs),
            tuple(item.max for item in inputs),
            # edges are optional (InputRange leaves them out): read only when every input has them
            tuple(tuple(getattr(item, "edges")) for item in inputs) if all(hasattr(i, "edges") for i in inputs) else (),
        )

    def __post_init__(self) -> None:
        if not 1 <= len(self.names) <= MAX_INPUTS:
            raise ProbeError(
                f"reading blob: {len(self.names)} inputs ({', '.join(self.names)}); the 16-byte blob "
                f"holds 1 to {MAX_INPUTS} inputs; record readings of larger specs another way"
            )
        if not len(self.names) == len(self.frac_bits) == len(self.lower) == len(self.upper):
            raise ProbeError(
                f"reading blob: {len(self.names)} names but {len(self.frac_bits)} frac_bits, "
                f"{len(self.lower)} lower and {len(self.upper)} upper bounds; give one of each per input"
            )
        for name, f, low, high in zip(self.names, self.frac_bits, self.lower, self.upper):
            if isinstance(f, bool) or not isinstance(f, int) or not 0 <= f <= MAX_FRAC_BITS:
                raise ProbeError(
                    f"reading blob: {name}: frac_bits={f!r} is not an integer 0..{MAX_FRAC_BITS}; "
                    "use the spec's frac_bits"
                )
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ProbeError(
                    f"reading blob: {name}: envelope [{low!r}, {high!r}] is not a finite range "
                    "with min < max; use the spec's min and max"
                )
            if math.ceil(math.ldexp(low, f)) < FINITE_MIN or math.floor(math.ldexp(high, f)) + 1 > FINITE_MAX:
                raise ProbeError(
                    f"reading blob: {name}: envelope [{_show(low)}, {_show(high)}] with frac_bits {f} needs codes "
                    f"beyond the 16-bit range {FINITE_MIN}..{FINITE_MAX}; lower frac_bits in the spec "
                    "(or record readings of this spec another way)"
                )
        key = json.dumps([list(self.names), list(self.frac_bits)]).encode("utf-8")
        object.__setattr__(self, "_seed", zlib.crc32(key))
        object.__setattr__(self, "_cuts", self._bin_codes())

    def _bin_codes(self) -> _Cuts:
        """Per input: the interior edges' exact values and, per bin, the least code inside it (ceil(e_k * 2^f)).

        Refuses a bin that holds no multiple of 2^-f: no code could stand
        for its readings without moving them to another cell.
        """
        if not self.edges:
            return ()
        if len(self.edges) != len(self.names):
            raise ProbeError(
                f"reading blob: {len(self.edges)} edge lists for {len(self.names)} inputs; "
                "give one per input (the spec's edges) or none"
            )
        cuts = []
        for name, f, edges in zip(self.names, self.frac_bits, self.edges):
            exact = [decimal_value(e) for e in edges]
            least = [math.ceil(e * (1 << f)) for e in exact[:-1]]
            for k, code in enumerate(least):
                top = exact[k + 1] * (1 << f)
                if not (code < top if k < len(least) - 1 else code <= top):
                    raise ProbeError(
                        f"reading blob: {name}: the bin [{_show(edges[k])}, {_show(edges[k + 1])}] holds no multiple "
                        f"of 2^-{f}, so no blob code keeps its readings in their cell; raise that input's frac_bits "
                        "in the spec or widen the bin"
                    )
            cuts.append((tuple(exact[1:-1]), tuple(least)))
        return tuple(cuts)

    def encode(self, values: Sequence[float | None]) -> bytes:
        """The 16-byte blob of one reading: one value (a real number, or None for missing) per input, in order."""
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise TypeError(
                f"reading blob: got {type(values).__name__}, expected a sequence of one number "
                f"(or None) per input: {', '.join(self.names)}"
            )
        if len(values) != len(self.names):
            raise ProbeError(
                f"reading blob: got {len(values)} values, expected {len(self.names)} "
                f"(one per input: {', '.join(self.names)}); give one value (None if missing) per input"
            )
        codes = [self._code(k, value) for k, value in enumerate(values)]
        body = _BODY.pack(BLOB_VERSION, len(codes), *codes, *[0] * (MAX_INPUTS - len(codes)))
        return body + _CRC.pack(zlib.crc32(body, self._seed))

    def _code(self, k: int, value: float | None) -> int:
        name, f = self.names[k], self.frac_bits[k]
        if value is None:
            return MISSING
        if isinstance(value, bool) or not isinstance(value, (numbers.Real, decimal.Decimal)):
            raise TypeError(
                f"reading blob: {name}={value!r} is a {type(value).__name__}; give a real number or None (missing)"
            )
        exact = exact_reading_value(name, value, "reading blob")
        if exact != exact:
            return NAN
        if exact in (math.inf, -math.inf):
            return POS_INF if exact > 0 else NEG_INF
        x = Fraction(exact)
        code = math.floor(x * (1 << f))
        upper = decimal_value(self.upper[k])
        if x > upper:
            code = max(code, math.floor(upper * (1 << f)) + 1)  # stay out of the closed last bin
        elif self._cuts and x >= decimal_value(self.lower[k]):
            interior, least = self._cuts[k]
            code = max(code, least[bisect.bisect_right(interior, x)])  # stay in the bin of x
        if not FINITE_MIN <= code <= FINITE_MAX:
            raise ProbeError(
                f"reading blob: {name}={_show_exact(value)} does not fit: with frac_bits {f} the blob holds finite values from "
                f"{_show(math.ldexp(FINITE_MIN, -f))} up to below {_show(math.ldexp(FINITE_MAX + 1, -f))}; it is "
                f"far outside the envelope [{_show(self.lower[k])}, {_show(self.upper[k])}], so clip it to just "
                "outside the envelope (the decision is the same fallback) or record it another way"
            )
        return code

    def decode(self, blob: bytes | bytearray | memoryview) -> tuple[float | None, ...]:
        """The reading in `blob`, one value per input (None for missing); a damaged or foreign blob is a ProbeError."""
        if not isinstance(blob, (bytes, bytearray, memoryview)):
            raise TypeError(f"reading blob: got {type(blob).__name__}, expected {BLOB_SIZE} bytes")
        blob = bytes(blob)
        if len(blob) != BLOB_SIZE:
            raise ProbeError(f"reading blob: got {len(blob)} bytes, expected {BLOB_SIZE}; pass the whole blob")
        if blob[0] != BLOB_VERSION:
            raise ProbeError(
                f"reading blob: version {blob[0]}, this certfsm reads version {BLOB_VERSION}; "
                "decode it with the certfsm release that wrote it, or re-encode the reading"
            )
        (stored,) = _CRC.unpack_from(blob, 12)
        computed = zlib.crc32(blob[:12], self._seed)
        if stored != computed:
            raise ProbeError(
                f"reading blob: checksum 0x{stored:08x} does not match its content (0x{computed:08x}): "
                "the blob is damaged, or was written for other inputs or frac_bits than "
                f"{', '.join(self.names)}; read it again from its source"
            )
        _, n, *codes = _BODY.unpack_from(blob)
        if n != len(self.names):
            raise ProbeError(
                f"reading blob: holds {n} inputs, expected {len(self.names)} ({', '.join(self.names)}); "
                "decode it with the layout of the spec that wrote it"
            )
        if any(codes[n:]):
            raise ProbeError(
                f"reading blob: unused slots {n}..{MAX_INPUTS - 1} are not zero; the encoder that "
                "wrote it does not follow this layout: re-encode the reading with this one"
            )
        return tuple(
            _SPECIAL[code] if code in _SPECIAL else math.ldexp(code, -f) for code, f in zip(codes, self.frac_bits)
        )


_SPECIAL = {MISSING: None, NAN: math.nan, NEG_INF: -math.inf, POS_INF: math.inf}
