"""Calibration: from a probe sample to the spec's inputs, with the field engineer's scale and offset.

A spec names its inputs freely ("temperature", "rho", "sensor_3"); a
probe reports quantities in its own vocabulary (`certfsm.runtime._probes`).
A calibration says, per spec input, which quantity feeds it and how a raw
reading becomes the value the controller was certified on:

    input = scale * quantity + offset

By default an input reads the quantity of its own name, with scale 1 and
offset 0. The example controller's five inputs (compute_util,
mem_bw_util, l2_miss_rate, temperature, queue_depth) are all standard
quantity names, so it runs without a calibration file. A file changes
only what it names:

    {
      "certfsm_calibration": 1,
      "inputs": {
        "temperature": {"scale": 0.001, "offset": -2.5},
        "mem_bw_util": {"quantity": "mem_util"}
      }
    }

Invariants of a `Calibration`: one entry per spec input, in spec order;
every scale finite and nonzero (a zero scale would map every reading to
the offset, hiding the sensor), every offset finite. Applying it never
raises: a missing quantity stays missing (None), NaN and inf pass through
for the runtime's envelope check. A bad file is refused with one line
naming the file, the JSON path and the fix.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from certfsm import ProbeError, json_path

from ._probes import HardwareProbe, ProbeSample

CALIBRATION_FORMAT_VERSION = 1
_ENTRY_FIELDS = ("quantity", "scale", "offset")


@dataclass(frozen=True)
class InputCalibration:
    """How one spec input is read: ``scale * sample[quantity] + offset``."""

    name: str
    quantity: str
    scale: float = 1.0
    offset: float = 0.0

    def apply(self, sample: ProbeSample) -> float | None:
        raw = sample.get(self.quantity)
        return None if raw is None else self.scale * raw + self.offset


@dataclass(frozen=True)
class Calibration:
    """One `InputCalibration` per spec input, in spec order; `source` names the file it came from."""

    inputs: tuple[InputCalibration, ...]
    source: str = "default calibration"

    @classmethod
    def identity(cls, input_names: Iterable[str]) -> "Calibration":
        """Each input reads the quantity of its own name, unscaled."""
        return cls(tuple(InputCalibration(name, name) for name in input_names))

    @classmethod
    def load(cls, path: str | os.PathLike[str], input_names: Iterable[str]) -> "Calibration":
        """Read a calibration file for a spec whose inputs are `input_names` (in spec order)."""
        label = os.fspath(path)
        names = tuple(input_names)
        document = _Reader(label).document()
        entries = document["inputs"]
        for name in entries:
            if name not in names:
                raise ProbeError(
                    f"{label}: {json_path(('inputs', name), '')} names no input of the spec "
                    f"(its inputs: {', '.join(names)}); use one of those names or remove the entry"
                )
        return cls(tuple(_entry(label, name, entries.get(name, {})) for name in names), label)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(item.name for item in self.inputs)

    def reading(self, sample: ProbeSample) -> tuple[float | None, ...]:
        """The spec's inputs from `sample`, in spec order; None where the quantity is missing."""
        return tuple(item.apply(sample) for item in self.inputs)

    def check_probe(self, probe: HardwareProbe) -> None:
        """Refuse, before the first cycle, an input that reads a quantity `probe` never reports."""
        offered = probe.quantities
        for item in self.inputs:
            if item.quantity not in offered:
                raise ProbeError(
                    f"{self.source}: input {item.name} reads quantity {item.quantity!r}, which the {probe.label} "
                    f"probe does not report (it reports {', '.join(sorted(offered))}); set "
                    f"{json_path(('inputs', item.name, 'quantity'), '')} to one of those"
                )


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _kind(value: Any) -> str:
    """The JSON kind of a parsed value, for messages."""
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
        type(None): "null",
    }[type(value)]


class _Reader:
    """Reads and checks the file's shape; every problem is one line naming the file and the JSON path."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, parts: tuple[str | int, ...], problem: str, fix: str) -> ProbeError:
        return ProbeError(f"{self.label}: {json_path(parts, 'top level')}{problem}; {fix}")

    def document(self) -> dict[str, Any]:
        try:
            text = Path(self.label).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problem = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc.strerror or str(exc)
            raise ProbeError(
                f"{self.label}: cannot read the calibration file ({problem}); "
                "give the path of a readable UTF-8 JSON file"
            ) from None
        try:
            data = json.loads(text, object_pairs_hook=self._object)
        except json.JSONDecodeError as exc:
            raise ProbeError(
                f"{self.label}: line {exc.lineno}, column {exc.colno}: invalid JSON ({exc.msg}); "
                "fix the JSON syntax there"
            ) from None
        if not isinstance(data, dict):
            raise self.fail(
                (), f" is {_kind(data)}", 'write an object such as {"certfsm_calibration": 1, "inputs": {}}'
            )
        for key in data:
            if key not in ("certfsm_calibration", "inputs"):
                raise self.fail((key,), " is not a field of a calibration file", "use certfsm_calibration and inputs")
        version = data.get("certfsm_calibration")
        if version != CALIBRATION_FORMAT_VERSION or isinstance(version, bool):
            problem = (
                " is missing"
                if "certfsm_calibration" not in data
                else f"={_show(version)} is not a calibration format this certfsm reads"
            )
            raise self.fail(
                ("certfsm_calibration",),
                problem,
                f'write "certfsm_calibration": {CALIBRATION_FORMAT_VERSION} (the only version)',
            )
        inputs = data.get("inputs", {})
        if not isinstance(inputs, dict):
            raise self.fail(("inputs",), f" is {_kind(inputs)}", "write an object from input name to its calibration")
        for name, entry in inputs.items():
            if not isinstance(entry, dict):
                raise self.fail(
                    ("inputs", name), f" is {_kind(entry)}", 'write an object such as {"scale": 1.0, "offset": 0.0}'
                )
            for key in entry:
                if key not in _ENTRY_FIELDS:
                    raise self.fail(
                        ("inputs", name, key),
                        " is not a field of an input's calibration",
                        f"use {', '.join(_ENTRY_FIELDS)}",
                    )
        return data

    def _object(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        document = dict(pairs)
        if len(document) < len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:  # stops at the first repeated key: there is one
                if key in seen:
                    break
                seen.add(key)
            raise ProbeError(
                f"{self.label}: key {key!r} appears more than once in one object "
                "(JSON would keep only the last); keep one"
            )
        return document


def _entry(label: str, name: str, entry: dict[str, Any]) -> InputCalibration:
    quantity = entry.get("quantity", name)
    if not isinstance(quantity, str) or not quantity:
        raise ProbeError(
            f"{label}: {json_path(('inputs', name, 'quantity'), '')}={_show(quantity)} is not a "
            'quantity name; write a non-empty string such as "temperature"'
        )
    scale = _number(label, name, "scale", entry.get("scale", 1.0))
    if scale == 0:
        raise ProbeError(
            f"{label}: {json_path(('inputs', name, 'scale'), '')}=0 would map every reading to "
            "the offset; write a nonzero scale (1.0 leaves the reading as it is)"
        )
    return InputCalibration(name, quantity, scale, _number(label, name, "offset", entry.get("offset", 0.0)))


def _number(label: str, name: str, field: str, value: Any) -> float:
    where = json_path(("inputs", name, field), "")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProbeError(
            f"{label}: {where}={_show(value)} is {_kind(value)}, not a number; "
            f"write a number such as {1.0 if field == 'scale' else 0.0}"
        )
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise ProbeError(f"{label}: {where}={_show(value)} is not finite; write a finite number")
    return number
