"""The 16-byte reading blob: round trip, the byte layout, cells kept, damage and foreign blobs refused, no silent wrapping."""

from __future__ import annotations

import math
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm import CertfsmError, ProbeError
from certfsm import load_spec
from certfsm.examples import example_spec_path
from certfsm.runtime._blob import BLOB_SIZE, FINITE_MAX, FINITE_MIN, MISSING, NAN, NEG_INF, POS_INF, BlobLayout

SPEC = load_spec(example_spec_path("coadapt"))
LAYOUT = BlobLayout.for_inputs(SPEC.inputs)


def in_cell(item, x):
    """The bin of x for a spec input (docs/semantics.md, "Cells"), or None when x is outside the envelope, NaN or inf: the oracle."""
    if x is None or not item.min <= x <= item.max:
        return None
    return sum(x >= e for e in item.edges[1:-1])


def value_for(item, f):
    """Any value the blob must carry for input `item`: missing, NaN, +-inf, or a finite value inside the code range."""
    finite = st.floats(math.ldexp(FINITE_MIN, -f), math.ldexp(FINITE_MAX + 1, -f), exclude_max=True)
    near_envelope = st.floats(item.min - 2, item.max + 2)
    on_edges = st.sampled_from(item.edges).flatmap(
        lambda e: st.sampled_from([e, math.nextafter(e, -math.inf), math.nextafter(e, math.inf)])
    )
    return st.one_of(
        st.none(), st.just(math.nan), st.just(math.inf), st.just(-math.inf), finite, near_envelope, on_edges
    )


readings = st.tuples(*(value_for(item, f) for item, f in zip(SPEC.inputs, LAYOUT.frac_bits)))


def test_example_layout_uses_the_spec_frac_bits_and_fits_16_bytes():
    assert LAYOUT.names == tuple(item.name for item in SPEC.inputs)
    assert LAYOUT.frac_bits == (6, 6, 6, 4, 0)
    assert len(LAYOUT.encode([50.0, 50.0, 10.0, 60.0, 3])) == BLOB_SIZE == 16


def test_byte_layout_is_pinned():
    """Version, count, five little-endian int16 codes, CRC-32 seeded with the layout key: as the docstring says."""
    blob = LAYOUT.encode([1.5, None, math.nan, math.inf, -math.inf])
    version, count, *codes = struct.unpack_from("<BB5h", blob)
    assert (version, count) == (1, 5)
    assert codes == [96, MISSING, NAN, POS_INF, NEG_INF]  # 1.5 * 2^6 = 96
    seed = zlib.crc32(
        b'[["compute_util", "mem_bw_util", "l2_miss_rate", "temperature", "queue_depth"], [6, 6, 6, 4, 0]]'
    )
    assert struct.unpack_from("<I", blob, 12)[0] == zlib.crc32(blob[:12], seed)
    assert blob[:12].hex() == "0105600000800180ff7f0280"


@settings(max_examples=examples(300), deadline=None)
@given(readings)
def test_round_trip_keeps_every_value_within_one_step_and_every_cell(reading):
    blob = LAYOUT.encode(reading)
    decoded = LAYOUT.decode(blob)
    for item, f, x, y in zip(SPEC.inputs, LAYOUT.frac_bits, reading, decoded):
        if x is None or math.isnan(x):
            assert (y is None) if x is None else math.isnan(y)
            continue
        if math.isinf(x) or x <= item.max:
            assert y <= x < y + math.ldexp(1, -f) or y == x
        else:  # just above the envelope: stored above max, never folded into the closed last bin
            assert item.max < y <= max(x, math.ldexp(math.floor(math.ldexp(item.max, f)) + 1, -f))
        assert in_cell(item, y) == in_cell(item, x), (item.name, x, y)
    assert LAYOUT.encode(decoded) == blob, "a decoded reading must encode to the same blob"


def test_a_value_just_above_max_stays_out_of_the_envelope():
    (compute_util, *_) = LAYOUT.decode(LAYOUT.encode([100.001, 0, 0, 20, 0]))
    assert compute_util == 100 + 1 / 64


def test_fewer_inputs_leave_zero_slots():
    layout = BlobLayout(("a", "b"), (2, 0), (0.0, 0.0), (10.0, 5.0))
    blob = layout.encode([2.25, 4])
    assert blob[1] == 2 and blob[6:12] == bytes(6)
    assert layout.decode(blob) == (2.25, 4.0)


def test_inputs_without_frac_bits_get_the_finest_that_holds_twice_the_envelope():
    items = [
        type("Input", (), dict(name="x", min=-1.0, max=3.0, frac_bits=None)),
        type("Input", (), dict(name="y", min=0.0, max=20000.0, frac_bits=None)),
    ]
    assert BlobLayout.for_inputs(items).frac_bits == (12, 0)  # 6 * 2^12 = 24576 <= 32766 < 6 * 2^13


# ---------------------------------------------------------------- damage


EXAMPLE_BLOBS = [
    LAYOUT.encode(r)
    for r in ([0, 0, 0, 20, 0], [55.3, 99.9, None, math.nan, 63], [-500.0, 511.9, 1e-9, -math.inf, 32766])
]


@pytest.mark.parametrize("blob", EXAMPLE_BLOBS, ids=["zeros", "mixed", "extremes"])
def test_every_single_bit_flip_is_detected(blob):
    for bit in range(8 * BLOB_SIZE):
        damaged = bytearray(blob)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(ProbeError, match=r"^reading blob: (version \d+|checksum 0x[0-9a-f]{8} does not match)"):
            LAYOUT.decode(bytes(damaged))


@settings(max_examples=examples(100), deadline=None)
@given(readings, st.binary(min_size=BLOB_SIZE, max_size=BLOB_SIZE))
def test_random_damage_is_detected(reading, noise):
    blob = LAYOUT.encode(reading)
    damaged = bytes(a ^ b for a, b in zip(blob, noise))
    if damaged != blob:
        with pytest.raises(ProbeError):
            LAYOUT.decode(damaged)


def test_wrong_version_is_refused_even_with_a_matching_checksum():
    body = bytes([2]) + EXAMPLE_BLOBS[1][1:12]
    blob = body + struct.pack("<I", zlib.crc32(body, LAYOUT._seed))
    with pytest.raises(
        ProbeError,
        match=r"^reading blob: version 2, this certfsm reads version 1; decode it with "
        r"the certfsm release that wrote it, or re-encode the reading$",
    ):
        LAYOUT.decode(blob)


def test_a_blob_of_another_layout_fails_the_checksum():
    other = BlobLayout(LAYOUT.names, (6, 6, 6, 4, 1), LAYOUT.lower, LAYOUT.upper)
    with pytest.raises(
        ProbeError,
        match=r"^reading blob: checksum 0x[0-9a-f]{8} does not match its content "
        r"\(0x[0-9a-f]{8}\): the blob is damaged, or was written for other inputs or "
        r"frac_bits than compute_util, mem_bw_util, l2_miss_rate, temperature, "
        r"queue_depth; read it again from its source$",
    ):
        LAYOUT.decode(other.encode([1, 2, 3, 40, 5]))


@pytest.mark.parametrize(
    "blob, error, pattern",
    [
        (bytes(15), ProbeError, r"^reading blob: got 15 bytes, expected 16; pass the whole blob$"),
        (EXAMPLE_BLOBS[0] + b"\0", ProbeError, r"^reading blob: got 17 bytes, expected 16; pass the whole blob$"),
        ("0105", TypeError, r"^reading blob: got str, expected 16 bytes$"),
    ],
)
def test_decode_refuses_what_is_not_a_blob(blob, error, pattern):
    with pytest.raises(error, match=pattern):
        LAYOUT.decode(blob)


def test_decode_accepts_bytearray_and_memoryview():
    assert LAYOUT.decode(bytearray(EXAMPLE_BLOBS[1])) == LAYOUT.decode(memoryview(EXAMPLE_BLOBS[1]))


# ---------------------------------------------------------------- values that do not fit


@pytest.mark.parametrize(
    "reading, pattern",
    [
        (
            [512.0, 0, 0, 20, 0],
            r"^reading blob: compute_util=512\.0 does not fit: with frac_bits 6 the blob holds finite "
            r"values from -511\.953125 up to below 511\.984375; it is far outside the envelope \[0, 100\], "
            r"so clip it to just outside the envelope \(the decision is the same fallback\) or record it another way$",
        ),
        ([0, -511.96, 0, 20, 0], r"^reading blob: mem_bw_util=-511\.96 does not fit: with frac_bits 6 "),
        ([0, 0, 1e308, 20, 0], r"^reading blob: l2_miss_rate=1e\+308 does not fit: "),
        (
            [0, 0, 0, -2048.0, 0],
            r"^reading blob: temperature=-2048\.0 does not fit: with frac_bits 4 the blob holds finite "
            r"values from -2047\.8125 up to below 2047\.9375; it is far outside the envelope \[20, 110\]",
        ),
        (
            [0, 0, 0, 20, 32767],
            r"^reading blob: queue_depth=32767 does not fit: with frac_bits 0 the blob holds finite "
            r"values from -32765 up to below 32767;",
        ),
        (
            [0, 0, 0, 20],
            r"^reading blob: got 4 values, expected 5 \(one per input: compute_util, mem_bw_util, "
            r"l2_miss_rate, temperature, queue_depth\); give one value \(None if missing\) per input$",
        ),
    ],
)
def test_values_that_do_not_fit_are_refused_never_wrapped(reading, pattern):
    with pytest.raises(ProbeError, match=pattern) as caught:
        LAYOUT.encode(reading)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, CertfsmError)


def test_the_extreme_codes_still_fit():
    low, high = math.ldexp(FINITE_MIN, -6), math.nextafter(math.ldexp(FINITE_MAX + 1, -6), 0)
    assert LAYOUT.decode(LAYOUT.encode([low, high, 0, 20, -32765]))[:2] == (low, math.ldexp(FINITE_MAX, -6))


@pytest.mark.parametrize(
    "reading, pattern",
    [
        ([0, 0, 0, 20, "3"], r"^reading blob: queue_depth='3' is a str; give a real number or None \(missing\)$"),
        ([True, 0, 0, 20, 0], r"^reading blob: compute_util=True is a bool; "),
        ("01234", r"^reading blob: got str, expected a sequence of one number \(or None\) per input: compute_util, "),
    ],
)
def test_values_of_the_wrong_type_are_a_type_error(reading, pattern):
    with pytest.raises(TypeError, match=pattern):
        LAYOUT.encode(reading)


@pytest.mark.parametrize(
    "args, pattern",
    [
        (
            (("a",) * 6, (0,) * 6, (0.0,) * 6, (1.0,) * 6),
            r"^reading blob: 6 inputs \(a, a, a, a, a, a\); the 16-byte blob holds 1 to 5 inputs; record readings of larger specs another way$",
        ),
        (((), (), (), ()), r"^reading blob: 0 inputs \(\); the 16-byte blob holds 1 to 5 inputs"),
        (
            (("a", "b"), (0,), (0.0, 0.0), (1.0, 1.0)),
            r"^reading blob: 2 names but 1 frac_bits, 2 lower and 2 upper bounds; ",
        ),
        (
            (("a",), (25,), (0.0,), (1.0,)),
            r"^reading blob: a: frac_bits=25 is not an integer 0\.\.24; use the spec's frac_bits$",
        ),
        ((("a",), (None,), (0.0,), (1.0,)), r"^reading blob: a: frac_bits=None is not an integer 0\.\.24;"),
        (
            (("a",), (0,), (1.0,), (1.0,)),
            r"^reading blob: a: envelope \[1\.0, 1\.0\] is not a finite range with min < max;",
        ),
        (
            (("a",), (24,), (0.0,), (100.0,)),
            r"^reading blob: a: envelope \[0, 100\] with frac_bits 24 needs codes beyond the "
            r"16-bit range -32765\.\.32766; lower frac_bits in the spec \(or record readings of "
            r"this spec another way\)$",
        ),
        (
            (("rho",), (0,), (0.0,), (60760.0,)),
            r"^reading blob: rho: envelope \[0, 60760\] with frac_bits 0 needs codes beyond",
        ),
    ],
)
def test_layouts_that_cannot_hold_their_inputs_are_refused(args, pattern):
    with pytest.raises(ProbeError, match=pattern):
        BlobLayout(*args)
