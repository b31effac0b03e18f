"""Canonical JSON: the same payload always gives the same bytes, so a hash names a value rather than a formatting.

Anything that can read JSON can audit a file written this way. The
canonical form of a value is ``json.dumps(value, sort_keys=True,
separators=(",", ":"), ensure_ascii=True, allow_nan=False)`` encoded as
ASCII: no whitespace, object keys sorted, non-ASCII text escaped as
``\\uXXXX``, integers in full, floats as Python's ``repr`` (the shortest
text that reads back to the same float64), no NaN or infinity. Parsing
canonical bytes and writing them again gives the same bytes, so a loader
can recompute the hash from what it parsed.

Standard library only: the artifact loader, which runs on embedded targets, builds on it.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Mapping

from ._errors import ArtifactError
from ._jsonpath import json_path


def canonical_bytes(obj: Any) -> bytes:
    """The canonical JSON bytes of `obj` (see the module docstring); numpy scalars and arrays become plain JSON.

    Refuses, naming the JSON path, what would not read back as the same
    value: NaN, infinities, non-string object keys, other Python objects.
    """
    return _canonical(_plain(obj, ()))


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of `data` as 64 lowercase hex digits."""
    return hashlib.sha256(data).hexdigest()


def _canonical(plain: Any) -> bytes:
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def _plain(value: Any, parts: tuple[str | int, ...]) -> Any:
    """`value` as plain JSON types (dict with str keys, list, str, int, finite float, bool, None)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ArtifactError(
                f"cannot write canonical JSON: {json_path(parts, 'the value')}={value!r} is not a finite number "
                "(JSON has no NaN or Infinity); give a finite number"
            )
        return float(value)
    if isinstance(value, Mapping):
        result = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ArtifactError(
                    f"cannot write canonical JSON: {json_path(parts, 'the value')} has the key {key!r} of type "
                    f"{type(key).__name__}; JSON object keys are strings, convert it"
                )
            result[key] = _plain(item, parts + (key,))
        return result
    if isinstance(value, (list, tuple)):
        return [item if type(item) in (int, str) else _plain(item, parts + (k,)) for k, item in enumerate(value)]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return _plain(tolist(), parts)
    raise ArtifactError(
        f"cannot write canonical JSON: {json_path(parts, 'the value')} is of type {type(value).__name__}; "
        "give numbers, strings, booleans, None, lists or dicts"
    )
