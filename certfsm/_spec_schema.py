"""The spec file as plain JSON and against its JSON Schema, with one-line messages.

The first two of the three steps of reading a spec (`certfsm._spec` runs
them, then the semantic checks of `certfsm._spec_rules`):

1. plain JSON: the file exists, parses (line and column on a syntax
   error), has no repeated object keys and only finite numbers;
2. the schema (``certfsm/spec.schema.json``, draft 2020-12): shapes,
   types, ranges and unknown keys; its ``description`` fields double as
   the reference documentation and as the fix hint of schema errors.

Each step raises SpecError on the first problem, as one line naming the
file, the JSON path, the value as the user wrote it (`show_value`) and
the fix. A document that passes both has the shape the schema describes,
which the semantic checks rely on.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema

from ._errors import SpecError
from ._jsonpath import json_path


def spec_schema() -> dict[str, Any]:
    """The JSON Schema of the spec format (package data ``certfsm/spec.schema.json``), a fresh copy."""
    return copy.deepcopy(_schema())


@functools.cache
def _schema() -> dict[str, Any]:
    text = importlib.resources.files("certfsm").joinpath("spec.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


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


class _RepeatedKeys(dict):
    """A JSON object in which some key appeared more than once (json keeps only the last)."""

    repeated: tuple[str, ...] = ()


def _object_from_pairs(pairs: list[tuple[str, Any]]) -> dict:
    document = dict(pairs)
    if len(document) == len(pairs):
        return document
    seen: set[str] = set()
    marked = _RepeatedKeys(pairs)
    marked.repeated = tuple(key for key, _ in pairs if key in seen or seen.add(key))
    return marked


def read_json(path: str | os.PathLike) -> Any:
    """The parsed spec file; an object with a repeated key is marked, for `check_plain_json` to report."""
    label = os.fspath(path)
    try:
        text = Path(label).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{label}: no such file (looked for {os.path.abspath(label)}); "
                        "give the path of a controller spec JSON file") from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"{label}: byte {exc.start} is not UTF-8 text; save the spec as UTF-8 JSON") from None
    except OSError as exc:
        raise SpecError(f"{label}: cannot read the spec file ({exc.strerror or exc}); "
                        "check that the path names a readable file") from None
    try:
        return json.loads(text, object_pairs_hook=_object_from_pairs)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{label}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg}); "
                        "fix the JSON syntax there") from None


def check_plain_json(data: Any, label: str, parts: tuple = ()) -> None:
    """Reject what JSON cannot mean: repeated object keys, NaN, infinities, integers beyond float64."""
    if isinstance(data, _RepeatedKeys):
        key = data.repeated[0]
        raise SpecError(f"{label}: {json_path(parts + (key,), 'top level')}: key {key!r} appears more than once in the same "
                        "object (JSON keeps only the last); keep one")
    if isinstance(data, dict):
        for key, value in data.items():
            check_plain_json(value, label, parts + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            check_plain_json(value, label, parts + (index,))
    elif isinstance(data, float) and not math.isfinite(data):
        raise SpecError(f"{label}: {json_path(parts, 'top level')}: {data!r} is not a finite number "
                        "(JSON has no NaN or Infinity); give a finite number")
    elif isinstance(data, int) and not isinstance(data, bool) and abs(data) > sys.float_info.max:
        raise SpecError(f"{label}: {json_path(parts, 'top level')}: {show_value(data)} is too large for a float64; "
                        "give a smaller number")


# At one JSON path a wrong type explains everything else, and an unknown key often explains a missing one.
_KEYWORD_PRIORITY = {"type": 0, "additionalProperties": 1, "required": 2}


def check_schema(data: Any, label: str) -> None:
    """Raise on the first schema error: first in document order, then by keyword priority and message."""
    errors = list(_validator().iter_errors(data))
    if errors:
        first = min(errors, key=lambda e: (_document_order(data, e.absolute_path),
                                           _KEYWORD_PRIORITY.get(e.validator, len(_KEYWORD_PRIORITY)),
                                           e.validator, e.message))
        raise SpecError(f"{label}: {_schema_message(first)}")


def _document_order(data: Any, parts) -> tuple[int, ...]:
    order = []
    for part in parts:
        order.append(list(data).index(part) if isinstance(data, dict) else part)
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
        return (f"{json_path(parts + [unknown], 'top level')}: unknown field; remove it or fix the spelling "
                f"(allowed here: {', '.join(allowed)})")
    if error.validator == "oneOf" and isinstance(instance, dict) and all(
            list(option) == ["required"] for option in error.validator_value):
        names = [option["required"][0] for option in error.validator_value]
        given = [name for name in names if name in instance]
        what = f"gives both {' and '.join(map(repr, given))}" if given else f"gives none of {', '.join(map(repr, names))}"
        return f"{json_path(parts, 'top level')}: {what}; give exactly one of {' or '.join(map(repr, names))}"
    if error.validator == "type":
        wanted = error.validator_value if isinstance(error.validator_value, str) else " or ".join(error.validator_value)
        return f"{json_path(parts, 'top level')}: {show_value(instance)} is not of type {wanted!r}; {expected}"
    if error.validator == "minItems":
        return (f"{json_path(parts, 'top level')}: needs at least {error.validator_value} entries, got {len(instance)}; "
                f"{expected}")
    if error.validator == "uniqueItems":
        repeated = next(item for k, item in enumerate(instance) if item in instance[:k])
        return f"{json_path(parts, 'top level')}: {show_value(repeated)} appears more than once; list each entry once"
    if error.validator == "const":
        return f"{json_path(parts, 'top level')}: {show_value(instance)} is not supported; {expected}"
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    return f"{json_path(parts, 'top level')}: {message}; {expected}"
