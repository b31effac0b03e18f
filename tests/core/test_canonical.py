"""Canonical JSON: compact sorted ASCII bytes that read back to the same value, and refusals that name the path."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from certfsm._canonical import canonical_bytes, sha256_hex
from certfsm._errors import ArtifactError


def test_canonical_bytes_are_compact_sorted_ascii_and_read_back_identically():
    value = {"b": [1, 2.5, -0.0, 1e-300, 1e22], "a": "caf\u00e9 \u2713", "c": {"z": None, "y": True}}
    data = canonical_bytes(value)
    assert data == b'{"a":"caf\\u00e9 \\u2713","b":[1,2.5,-0.0,1e-300,1e+22],"c":{"y":true,"z":null}}'
    assert canonical_bytes(json.loads(data)) == data
    assert sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_canonical_bytes_turn_numpy_values_and_tuples_into_plain_json():
    value = {"x": np.float32(0.1), "n": np.int64(7), "ok": np.bool_(True), "grid": np.arange(3), "t": (1, 2)}
    assert canonical_bytes(value) == b'{"grid":[0,1,2],"n":7,"ok":true,"t":[1,2],"x":0.10000000149011612}'


@pytest.mark.parametrize(
    "value, message",
    [
        (
            {"table": [1.0, float("nan")]},
            r"^cannot write canonical JSON: table\[1\]=nan is not a finite number \(JSON has no NaN or Infinity\); "
            r"give a finite number$",
        ),
        (
            {"a": {1: "x"}},
            r"^cannot write canonical JSON: a has the key 1 of type int; JSON object keys are strings, convert it$",
        ),
        (
            {"a": [object()]},
            r"^cannot write canonical JSON: a\[0\] is of type object; give numbers, strings, booleans, None, lists or "
            r"dicts$",
        ),
        (np.array([1.0, np.inf]), r"^cannot write canonical JSON: the value\[1\]=inf is not a finite number"),
        (float("nan"), r"^cannot write canonical JSON: the value=nan is not a finite number"),
    ],
)
def test_canonical_bytes_refuse_what_would_not_read_back(value, message):
    with pytest.raises(ArtifactError, match=message):
        canonical_bytes(value)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
        max_leaves=20,
    )
)
def test_canonical_bytes_are_a_fixed_point_of_parsing(value):
    data = canonical_bytes(value)
    assert json.loads(data) == value
    assert canonical_bytes(json.loads(data)) == data and data.isascii()
