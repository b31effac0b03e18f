"""The spec file as plain JSON and against its JSON Schema, with one-line messages.

The first two of the three steps of reading a spec (`certfsm._spec` runs
them, then the semantic checks of `certfsm._spec_rules`):

1. plain JSON: the file exists, parses (line and column on a syntax
   error), has no repeated object keys and only finite numbers, each a
   decimal that certfsm keeps exactly (see `_NotKept`);
2. the schema (``certfsm/spec.schema.json``, draft 2020-12): shapes,
   types, ranges and unknown keys; its ``description`` fields double as
   the reference documentation and as the fix hint of schema errors.

Each step raises SpecError on the first problem, as one line naming the
file, the JSON path, the value as the user wrote it (`show_value`) and
the fix. A document that passes both has the shape the schema describes,
which the semantic checks rely on.

Every file gets that answer in bounded time, so the limits come before
the work they bound: nesting depth is measured on the text before the
JSON reader recurses into it, an integer is kept as text when it has too
many digits to be a float64 (Python refuses to convert 4 300 digits), and
the number of JSON values is capped before the schema, whose cost grows
with every value and every error (a 100 001-entry list took minutes).
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import math
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterable

import jsonschema

from ._decimal import is_spec_decimal
from ._errors import SpecError
from ._jsonpath import json_path

# A spec nests 5 levels (legality_rules[0].when.<input>.min); the readers recurse once or more per level.
MAX_DEPTH = 32
# Values of all kinds in one document: a spec needs a few hundred (a long explicit edge list a few thousand).
MAX_VALUES = 10_000
# float64's largest value has 309 digits; longer integers are kept as text and refused by check_plain_json.
MAX_INTEGER_DIGITS = 400
# Every integer up to 2^53 is a float64 that writes back as itself; larger ones are checked one by one.
_EXACT_INTEGERS = 2**53
_BRACKET_OR_STRING = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]')


@functools.cache
def _schema() -> dict[str, Any]:
    text = importlib.resources.files("certfsm").joinpath("spec.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(_schema())


def show_number(value: float) -> str:
    """A number for messages and summaries: whole numbers without a decimal point, others as Python's repr."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def show_value(value: Any) -> str:
    """A value as the user wrote it: numbers in JSON notation, strings quoted."""
    if isinstance(value, str):
        return repr(value)
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _OutOfRange(str):
    """The text of a JSON number that no float64 holds (a 5 000-digit integer, 1e400), for `check_plain_json`."""


def _integer(text: str) -> int | _OutOfRange:
    return int(text) if len(text.lstrip("-")) <= MAX_INTEGER_DIGITS else _OutOfRange(text)


def _not_kept_message(where: str, text: str) -> str:
    shown = text if len(text) <= 60 else text[:57] + "..."
    return (
        f"{where}: {shown} has more digits than certfsm keeps exactly (a float64 holds it as "
        f"{float(text)!r}, another number); write the decimal you mean with at most 17 significant digits, "
        f"e.g. {float(text)!r}"
    )


class _NotKept(str):
    """The text of a JSON number that its float64 does not write back as the same decimal (0.30000000000000001).

    A spec constant means the decimal written, and certfsm carries it as
    the float64 whose shortest ``repr`` is that decimal (`decimal_value`);
    a decimal with more digits than that would silently become another
    number, so `check_plain_json` refuses it.
    """


def _real(text: str) -> float | _OutOfRange | _NotKept:
    value = float(text)
    if not math.isfinite(value):
        return _OutOfRange(text)
    return value if is_spec_decimal(text) else _NotKept(text)


def _check_depth(text: str, label: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, measured on the text (brackets inside strings do not count)."""
    depth = 0
    for match in _BRACKET_OR_STRING.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                raise SpecError(
                    f"{label}: line {line}: nesting deeper than {MAX_DEPTH} levels; a controller spec "
                    "nests 5 levels, remove the extra brackets"
                )
        elif token in "]}":
            depth -= 1


class _RepeatedKeys(dict[str, Any]):
    """A JSON object in which some key appeared more than once (json keeps only the last)."""

    repeated: tuple[str, ...] = ()


def _object_from_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) == len(pairs):
        return document
    seen: set[str] = set()
    repeated: list[str] = []
    for key, _ in pairs:
        if key in seen:
            repeated.append(key)
        seen.add(key)
    marked = _RepeatedKeys(pairs)
    marked.repeated = tuple(repeated)
    return marked


def read_json(path: str | os.PathLike[str]) -> Any:
    """The parsed spec file; an object with a repeated key is marked, for `check_plain_json` to report."""
    label = os.fspath(path)
    try:
        text = Path(label).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(
            f"{label}: no such file (looked for {os.path.abspath(label)}); give the path of a controller spec JSON file"
        ) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{label}: byte {exc.start} is not UTF-8 text; save the spec as UTF-8 JSON") from None
    except OSError as exc:
        raise SpecError(
            f"{label}: cannot read the spec file ({exc.strerror or exc}); check that the path names a readable file"
        ) from None
    _check_depth(text, label)
    try:
        return json.loads(text, object_pairs_hook=_object_from_pairs, parse_int=_integer, parse_float=_real)
    except json.JSONDecodeError as exc:
        raise SpecError(
            f"{label}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg}); fix the JSON syntax there"
        ) from None


def check_plain_json(data: Any, label: str) -> None:
    """Reject what JSON cannot mean, and documents too deep or too large to check in bounded time.

    JSON cannot mean repeated object keys, NaN, infinities or numbers
    beyond float64. The depth and size limits (MAX_DEPTH, MAX_VALUES) also
    hold for documents built in memory, which skip `read_json`. The first
    problem in document order is reported.
    """
    count = 0

    def check(data: Any, parts: tuple[str | int, ...]) -> None:
        nonlocal count
        count += 1
        where = json_path(parts, "top level")
        if count > MAX_VALUES:
            raise SpecError(
                f"{label}: {where}: value number {count} of the spec, more than the {MAX_VALUES} a "
                "controller spec may hold; shorten its long lists or objects ('bins' replaces long edges)"
            )
        if len(parts) > MAX_DEPTH:
            raise SpecError(
                f"{label}: {where}: nesting deeper than {MAX_DEPTH} levels; a controller spec nests "
                "5 levels, remove the extra brackets"
            )
        if isinstance(data, _RepeatedKeys):
            key = data.repeated[0]
            raise SpecError(
                f"{label}: {json_path(parts + (key,), 'top level')}: key {key!r} appears more than once "
                "in the same object (JSON keeps only the last); keep one"
            )
        if isinstance(data, dict):
            for key, value in data.items():
                check(value, parts + (key,))
        elif isinstance(data, list):
            for index, value in enumerate(data):
                check(value, parts + (index,))
        elif isinstance(data, _OutOfRange):
            shown = data if len(data) <= 60 else data[:57] + "..."
            raise SpecError(f"{label}: {where}: {shown} is too large for a float64; give a smaller number")
        elif isinstance(data, _NotKept):
            raise SpecError(f"{label}: {_not_kept_message(where, data)}")
        elif isinstance(data, float) and not math.isfinite(data):
            raise SpecError(
                f"{label}: {where}: {data!r} is not a finite number (JSON has no NaN or Infinity); give a finite number"
            )
        elif isinstance(data, int) and not isinstance(data, bool) and abs(data) > sys.float_info.max:
            raise SpecError(f"{label}: {where}: {show_value(data)} is too large for a float64; give a smaller number")
        elif (
            isinstance(data, int)
            and not isinstance(data, bool)
            and abs(data) > _EXACT_INTEGERS
            and not is_spec_decimal(str(data))
        ):
            raise SpecError(f"{label}: {_not_kept_message(where, str(data))}")

    check(data, ())


# At one JSON path a wrong type explains everything else, and an unknown key often explains a missing one.
_KEYWORD_PRIORITY = {"type": 0, "additionalProperties": 1, "required": 2}


def check_schema(data: Any, label: str) -> None:
    """Raise on the first schema error: first in document order, then by keyword priority and message."""
    errors = list(_validator().iter_errors(data))
    if errors:
        first = min(
            errors,
            key=lambda e: (
                _document_order(data, e.absolute_path),
                _KEYWORD_PRIORITY.get(e.validator, len(_KEYWORD_PRIORITY)),
                e.validator,
                e.message,
            ),
        )
        raise SpecError(f"{label}: {_schema_message(first)}")


def _document_order(data: Any, parts: Iterable[str | int]) -> tuple[int, ...]:
    order: list[int] = []
    for part in parts:
        order.append(list(data).index(part) if isinstance(data, dict) else int(part))
        data = data[part]
    return tuple(order)


def _schema_message(error: jsonschema.ValidationError) -> str:
    """``<json path>: <what is wrong>; <fix>`` for one schema error."""
    parts = list(error.absolute_path)
    schema, instance = error.schema, error.instance
    expected = f"expected: {schema.get('description', 'see certfsm/spec.schema.json')}"
    if error.validator == "required":
        missing = next(key for key in error.validator_value if key not in instance)
        hint = schema.get("properties", {}).get(missing, {}).get("description", "")
        return f"{json_path(parts + [missing], 'top level')}: required field is missing; add it ({hint})"
    if error.validator == "additionalProperties":
        allowed = list(schema.get("properties", {}))
        unknown = next(key for key in instance if key not in allowed)
        return (
            f"{json_path(parts + [unknown], 'top level')}: unknown field; remove it or fix the spelling "
            f"(allowed here: {', '.join(allowed)})"
        )
    if (
        error.validator == "oneOf"
        and isinstance(instance, dict)
        and all(list(option) == ["required"] for option in error.validator_value)
    ):
        names = [option["required"][0] for option in error.validator_value]
        given = [name for name in names if name in instance]
        what = (
            f"gives both {' and '.join(map(repr, given))}" if given else f"gives none of {', '.join(map(repr, names))}"
        )
        return f"{json_path(parts, 'top level')}: {what}; give exactly one of {' or '.join(map(repr, names))}"
    if instance is None and error.validator in ("type", "enum", "const"):
        return _unfilled_message(json_path(parts, "top level"), parts, schema)
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, str) else " or ".join(error.validator_value)
        return f"{json_path(parts, 'top level')}: {show_value(instance)} is not of type {wanted!r}; {expected}"
    if error.validator == "minItems":
        return (
            f"{json_path(parts, 'top level')}: needs at least {error.validator_value} entries, got {len(instance)}; "
            f"{expected}"
        )
    if error.validator == "uniqueItems":
        repeated = _first_repeat(instance)
        return f"{json_path(parts, 'top level')}: {show_value(repeated)} appears more than once; list each entry once"
    if error.validator == "const":
        return f"{json_path(parts, 'top level')}: {show_value(instance)} is not supported; {expected}"
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    return f"{json_path(parts, 'top level')}: {message}; {expected}"


_UNFILLED_ENVELOPE = {
    "min": "the lowest value this input takes in service",
    "max": "the highest value this input takes in service",
}


def _unfilled_message(where: str, parts: list[str | int], schema: dict[str, Any]) -> str:
    """A null where a value belongs (as `certfsm spec init` leaves each envelope) read as what to fill in.

    Why a message of its own: the envelope is what every proof covers, so it must come from the plant the
    controller runs in; the schema's description alone would read as a type error.
    """
    if len(parts) == 3 and parts[0] == "inputs" and parts[2] in _UNFILLED_ENVELOPE:
        return (
            f"{where} is not filled in (null); write {_UNFILLED_ENVELOPE[str(parts[2])]}, in the physical unit "
            f"the network reads (name it in inputs[{parts[1]}].unit): every proof covers [min, max], so take the "
            "range from the plant, not from the model"
        )
    expected = str(schema.get("description", "see certfsm/spec.schema.json")).rstrip(".")
    return f"{where} is not filled in (null); write the value it needs ({expected[:1].lower()}{expected[1:]})"


def _first_repeat(items: list[object]) -> object:
    """The first item equal to an earlier one, in linear time for hashable items (token names)."""
    hashable: set[object] = set()
    other: list[object] = []
    for item in items:
        try:
            if item in hashable:
                return item
            hashable.add(item)
        except TypeError:
            if item in other:
                return item
            other.append(item)
    return None
