"""The vocabulary of the loader's reading of an artifact payload: the format's constants and the typed checks.

The loader reads a parsed payload into typed values with its own code
(`certfsm._artifact_reading`, which calls `certfsm._artifact_spec` and
`certfsm._artifact_table`), independent of the writer
(`certfsm._artifact_payload`), so that a wrong rule on one side shows in
a round trip instead of passing on both. `PayloadChecks` holds the
checks every part of that reading uses: the first failure raises one
ArtifactError naming the JSON path, the value and the rule; the caller
supplies the file label and the fix, because a damaged file and a buggy
producer need different advice.

Standard library and numpy only, like every module an artifact loader
imports.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from ._errors import ArtifactError


ARTIFACT_FORMAT_VERSION = 2
"""2: certificate entries hold no ``seconds`` (run facts live in the report, so the same spec and model give the
same bytes); 1 had them."""
MAX_FRAC_BITS = 24

_HEX64 = re.compile(r"[0-9a-f]{64}")


def _show(value: Any) -> str:
    """A JSON value as it appears in the file, cut to 60 characters."""
    text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None), list, dict)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _kind(value: Any) -> str:
    for kinds, name in (
        (type(None), "null"),
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a number"),
        (str, "a string"),
        (list, "a list"),
        (dict, "an object"),
    ):
        if isinstance(value, kinds):
            return name
    return f"a {type(value).__name__}"


class PayloadChecks:
    """Typed checks of the values of a parsed payload, each returning its value or raising at the first failure.

    `where` is the value's JSON path (``payload.grid.edges[0]``); the
    message is ``label: where=value is not ...; fix``.
    """

    def __init__(self, label: str, fix: str) -> None:
        self.label, self.fix = label, fix

    def fail(self, text: str) -> ArtifactError:
        return ArtifactError(f"{self.label}: {text}; {self.fix}")

    def obj(
        self, value: Any, where: str, keys: tuple[str, ...], *, only: bool = True, optional: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        """`value` as an object holding every key of `keys`; with `only`, no key outside `keys` and `optional`."""
        if not isinstance(value, dict):
            raise self.fail(f"{where} is {_kind(value)}, expected an object with the keys {', '.join(keys)}")
        for key in keys:
            if key not in value:
                raise self.fail(f"{where}.{key} is missing")
        for key in value if only else ():
            if key not in keys and key not in optional:
                also = f", and optionally {' and '.join(optional)}" if optional else ""
                raise self.fail(
                    f"{where}.{key} is not a field of artifact format {ARTIFACT_FORMAT_VERSION} "
                    f"(expected only {', '.join(keys)}{also})"
                )
        return value

    def items(self, value: Any, where: str, *, length: int | None = None, of: str = "", minimum: int = 0) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(f"{where} is {_kind(value)}, expected a list")
        if length is not None and len(value) != length:
            raise self.fail(f"{where} has {len(value)} entries but {of}")
        if len(value) < minimum:
            raise self.fail(f"{where} has {len(value)} entries, expected at least {minimum}")
        return value

    def integer(self, value: Any, where: str, low: int, high: int | None = None, what: str = "") -> int:
        if type(value) is not int or value < low or (high is not None and value > high):
            expected = what or (f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}")
            raise self.fail(f"{where}={_show(value)} is not {expected}")
        return value

    def number(self, value: Any, where: str) -> float:
        """A finite JSON number, as written (an int stays an int: the caller decides whether it may be one)."""
        if type(value) is int and abs(value) > 2**53:
            raise self.fail(f"{where}={_show(value)} is an integer beyond float64's exact range (2^53)")
        if type(value) not in (int, float) or not math.isfinite(value):
            raise self.fail(f"{where}={_show(value)} is not a finite number")
        number: float = value
        return number

    def text(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(f"{where}={_show(value)} is not a non-empty string")
        return value

    def digest(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not _HEX64.fullmatch(value):
            raise self.fail(f"{where}={_show(value)} is not a SHA-256 (64 lowercase hex digits)")
        return value
