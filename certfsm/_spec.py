"""The controller spec: a JSON file, validated against a JSON Schema, turned into a frozen IR.

Reading a spec happens in three steps, each of which reports the first
problem as one line naming the file, the JSON path and the fix:

1. plain JSON: the file exists, parses (line and column on a syntax
   error), has no repeated object keys and only finite numbers;
2. the schema (``certfsm/spec.schema.json``, draft 2020-12): shapes,
   types, ranges and unknown keys; its ``description`` fields double as
   the reference documentation and as the fix hint of schema errors;
3. the semantic checks the schema cannot express (envelopes, edges,
   names that must refer to each other, the ONNX file on disk).

Invariants of a `ControllerSpec` built here: every input has min < max
and strictly increasing float64 edges from exactly min to exactly max;
token names are unique and each has a unique 4-bit code; the
conservative token is legal and no rule forbids it; every rule box lies
inside the envelope and is non-empty; ``margin`` is None (no gate) or a
finite number >= 0. This module imports neither onnx, maraboupy nor z3,
so the runtime can load specs on a bare target.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

import jsonschema
import numpy as np

from ._decision import margin_from_probability
from ._errors import SpecError
from ._jsonpath import json_path


SPEC_FORMAT_VERSION = 1


class _ReadOnlyDict(dict):
    """A dict that refuses changes, so a frozen spec stays frozen; still a dict for json and isinstance, and picklable."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("a ControllerSpec mapping is read-only; build a new spec with dataclasses.replace")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self):
        return (type(self), (dict(self),))


@dataclass(frozen=True)
class InputSpec:
    """One network input: its operating envelope [min, max] and its bin edges.

    `edges` always holds the materialised float64 edges (given, or `bins`
    equal-width bins): strictly increasing, edges[0] == min, edges[-1] == max.
    """

    name: str
    unit: str
    min: float
    max: float
    edges: tuple[float, ...]
    frac_bits: int | None = None

    @property
    def n_bins(self) -> int:
        return len(self.edges) - 1


@dataclass(frozen=True)
class LegalityRule:
    """Inside the closed box [lower, upper] (full input dimension, clipped to the envelope) no token of `forbid` may be emitted."""

    name: str
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    forbid: tuple[str, ...]


@dataclass(frozen=True)
class SlaPath:
    """A monitored path: `metric` <= `limit`, at most `max_violations` violations per `window` cycles."""

    name: str
    metric: str
    limit: float
    window: int
    max_violations: int
    recovery_cycles: int


@dataclass(frozen=True)
class ControllerSpec:
    """A validated controller spec; build it with `load_spec` or `spec_from_dict`.

    `path` is the absolute path of the spec file and `model_path` the
    absolute path of the ONNX model. `tokens` is a read-only dict from
    token name to 4-bit code, in output order. `legal_tokens`, `overridable` and each
    rule's `forbid` are kept in output-index order, so two specs that
    differ only in the order of those lists compare equal. `margin` is the
    gate's logit margin (a probability threshold already converted);
    `probability` keeps the threshold as written, for reports.
    """

    name: str
    description: str
    path: Path
    model_path: Path
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    tokens: dict[str, int]
    legal_tokens: tuple[str, ...]
    decision: str
    conservative_token: str
    margin: float | None = None
    probability: float | None = None
    rules: tuple[LegalityRule, ...] = ()
    confirm_cycles: int = 1
    cooldown_cycles: int = 0
    sla_paths: tuple[SlaPath, ...] = ()
    overridable: tuple[str, ...] = ()
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens", _ReadOnlyDict(self.tokens))
        object.__setattr__(self, "_index", _ReadOnlyDict((t, k) for k, t in enumerate(self.outputs)))

    @property
    def n_inputs(self) -> int:
        return len(self.inputs)

    @property
    def n_outputs(self) -> int:
        return len(self.outputs)

    def output_index(self, token: str) -> int:
        """The network output index that scores `token`."""
        try:
            return self._index[token]
        except KeyError:
            raise SpecError(
                f"{self.path}: token {token!r} is not one of outputs ({', '.join(self.outputs)}); use one of those names"
            ) from None

    def is_legal_index(self, index: int) -> bool:
        return self.outputs[index] in self.legal_tokens

    @property
    def legal_indices(self) -> tuple[int, ...]:
        return tuple(self.output_index(t) for t in self.legal_tokens)

    @property
    def conservative_index(self) -> int:
        return self.output_index(self.conservative_token)

    @property
    def envelope_lower(self) -> np.ndarray:
        return _frozen_array([item.min for item in self.inputs])

    @property
    def envelope_upper(self) -> np.ndarray:
        return _frozen_array([item.max for item in self.inputs])

    def forbidden_indices(self, rule: LegalityRule) -> tuple[int, ...]:
        """Output indices of the tokens `rule` forbids, ascending."""
        return tuple(sorted(self.output_index(t) for t in rule.forbid))

    def to_json(self) -> dict[str, Any]:
        """The canonical spec document: loading it from `path` gives back an equal spec.

        Canonical means: explicit edges (never `bins`), floats for real
        numbers, every section with its defaults except an absent gate,
        each rule's `when` naming only the sides tighter than the envelope,
        and `model` relative to the spec file's folder.
        """
        document: dict[str, Any] = {
            "certfsm_spec": SPEC_FORMAT_VERSION,
            "name": self.name,
            "description": self.description,
            "model": PurePath(os.path.relpath(self.model_path, self.path.parent)).as_posix(),
            "inputs": [_input_json(item) for item in self.inputs],
            "outputs": list(self.outputs),
            "tokens": {t: self.tokens[t] for t in self.outputs},
            "legal_tokens": list(self.legal_tokens),
            "decision": self.decision,
            "conservative_token": self.conservative_token,
        }
        if self.probability is not None:
            document["confidence_gate"] = {"probability": self.probability}
        elif self.margin is not None:
            document["confidence_gate"] = {"margin": self.margin}
        document["legality_rules"] = [self._rule_json(rule) for rule in self.rules]
        document["hysteresis"] = {"confirm_cycles": self.confirm_cycles, "cooldown_cycles": self.cooldown_cycles}
        document["sla"] = {"paths": [_sla_json(p) for p in self.sla_paths]}
        document["overrides"] = {"overridable": list(self.overridable)}
        return document

    def _rule_json(self, rule: LegalityRule) -> dict[str, Any]:
        when: dict[str, dict[str, float]] = {}
        for item, low, high in zip(self.inputs, rule.lower, rule.upper):
            side = {}
            if low > item.min:
                side["min"] = low
            if high < item.max:
                side["max"] = high
            if side:
                when[item.name] = side
        return {"name": rule.name, "when": when, "forbid": list(rule.forbid)}


def _frozen_array(values) -> np.ndarray:
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


def _input_json(item: InputSpec) -> dict[str, Any]:
    document: dict[str, Any] = {"name": item.name, "unit": item.unit, "min": item.min, "max": item.max,
                                "edges": list(item.edges)}
    if item.frac_bits is not None:
        document["frac_bits"] = item.frac_bits
    return document


def _sla_json(path: SlaPath) -> dict[str, Any]:
    return {"name": path.name, "metric": path.metric, "limit": path.limit, "window": path.window,
            "max_violations": path.max_violations, "recovery_cycles": path.recovery_cycles}


# ---------------------------------------------------------------- reading


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


def load_spec(path: str | os.PathLike) -> ControllerSpec:
    """Read, validate and check the spec file at `path`; the ONNX model it names must exist."""
    return spec_from_dict(_read_json(path), path)


def spec_from_dict(data: Any, path: str | os.PathLike, *, require_model: bool = True) -> ControllerSpec:
    """Validate and check an already parsed spec document, as if it were read from `path`.

    `path` names the spec in error messages and anchors a relative
    `model`. With ``require_model=False`` the ONNX file need not exist
    (for specs built in memory); every other check still runs.
    """
    label = os.fspath(path)
    _check_plain_json(data, label)
    _check_schema(data, label)
    return _Builder(data, label, Path(os.path.abspath(label))).build(require_model)


def check_spec(path: str | os.PathLike) -> list[str]:
    """Human-readable summary lines of a valid spec (for ``certfsm spec check``); raises SpecError on problems."""
    spec = load_spec(path)
    lines = [f"spec {spec.name!r}: {spec.path}", f"model: {spec.model_path}", f"inputs ({spec.n_inputs}):"]
    for item in spec.inputs:
        unit = f" [{item.unit}]" if item.unit else ""
        fixed = f", frac_bits {item.frac_bits}" if item.frac_bits is not None else ""
        lines.append(f"  {item.name}{unit}: {_num(item.min)} .. {_num(item.max)}, {item.n_bins} bins "
                     f"(edges {', '.join(_num(e) for e in item.edges)}){fixed}")
    lines.append(f"outputs ({spec.n_outputs}), decision {spec.decision}:")
    for token in spec.outputs:
        status = "conservative" if token == spec.conservative_token else (
            "legal" if token in spec.legal_tokens else "NOT legal: must provably never win")
        lines.append(f"  {spec.output_index(token)}: {token} = code {spec.tokens[token]} ({status})")
    if spec.probability is not None:
        lines.append(f"confidence gate: probability {spec.probability:g} -> logit margin {spec.margin:.6g}")
    elif spec.margin is not None:
        lines.append(f"confidence gate: logit margin {spec.margin:.6g}")
    else:
        lines.append("confidence gate: none")
    lines.append(f"legality rules ({len(spec.rules)}):")
    for rule in spec.rules:
        box = [f"{item.name} in [{_num(lo)}, {_num(hi)}]"
               for item, lo, hi in zip(spec.inputs, rule.lower, rule.upper) if (lo, hi) != (item.min, item.max)]
        lines.append(f"  {rule.name}: forbid {', '.join(rule.forbid)} where {' and '.join(box) or 'anywhere'}")
    lines.append(f"hysteresis: confirm {spec.confirm_cycles} cycles, cooldown {spec.cooldown_cycles} cycles")
    lines.append(f"SLA paths ({len(spec.sla_paths)}):")
    for sla in spec.sla_paths:
        lines.append(f"  {sla.name}: {sla.metric} <= {_num(sla.limit)}, at most {sla.max_violations} violations "
                     f"per {sla.window} cycles, recovery {sla.recovery_cycles} cycles")
    lines.append(f"overridable: {', '.join(spec.overridable) or 'none'}")
    cells = math.prod(item.n_bins for item in spec.inputs)
    lines.append(f"grid: {' x '.join(str(item.n_bins) for item in spec.inputs)} = {cells} cells")
    return lines


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(float(value))


def _show(value: Any) -> str:
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


def _read_json(path: str | os.PathLike) -> Any:
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


def _check_plain_json(data: Any, label: str, parts: tuple = ()) -> None:
    """Reject what JSON cannot mean: repeated object keys, NaN, infinities, integers beyond float64."""
    if isinstance(data, _RepeatedKeys):
        key = data.repeated[0]
        raise SpecError(f"{label}: {json_path(parts + (key,), 'top level')}: key {key!r} appears more than once in the same "
                        "object (JSON keeps only the last); keep one")
    if isinstance(data, dict):
        for key, value in data.items():
            _check_plain_json(value, label, parts + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            _check_plain_json(value, label, parts + (index,))
    elif isinstance(data, float) and not math.isfinite(data):
        raise SpecError(f"{label}: {json_path(parts, 'top level')}: {data!r} is not a finite number "
                        "(JSON has no NaN or Infinity); give a finite number")
    elif isinstance(data, int) and not isinstance(data, bool) and abs(data) > sys.float_info.max:
        raise SpecError(f"{label}: {json_path(parts, 'top level')}: {_show(data)} is too large for a float64; "
                        "give a smaller number")


# At one JSON path a wrong type explains everything else, and an unknown key often explains a missing one.
_KEYWORD_PRIORITY = {"type": 0, "additionalProperties": 1, "required": 2}


def _check_schema(data: Any, label: str) -> None:
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
        return f"{json_path(parts, 'top level')}: {_show(instance)} is not of type {wanted!r}; {expected}"
    if error.validator == "minItems":
        return (f"{json_path(parts, 'top level')}: needs at least {error.validator_value} entries, got {len(instance)}; "
                f"{expected}")
    if error.validator == "uniqueItems":
        repeated = next(item for k, item in enumerate(instance) if item in instance[:k])
        return f"{json_path(parts, 'top level')}: {_show(repeated)} appears more than once; list each entry once"
    if error.validator == "const":
        return f"{json_path(parts, 'top level')}: {_show(instance)} is not supported; {expected}"
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    return f"{json_path(parts, 'top level')}: {message}; {expected}"


class _Builder:
    """The semantic checks, in document order, on a schema-valid document; `build` returns the spec."""

    def __init__(self, data: dict, label: str, path: Path) -> None:
        self.data, self.label, self.path = data, label, path

    def fail(self, text: str) -> SpecError:
        return SpecError(f"{self.label}: {text}")

    def build(self, require_model: bool) -> ControllerSpec:
        data = self.data
        inputs = self.inputs()
        outputs = self.outputs()
        tokens = self.tokens(outputs)
        known = f"known: {', '.join(outputs)}"
        for k, token in enumerate(data["legal_tokens"]):
            self.require_known(f"legal_tokens[{k}]", token, outputs, known)
        legal = tuple(t for t in outputs if t in data["legal_tokens"])
        conservative = data["conservative_token"]
        self.require_known("conservative_token", conservative, outputs, known)
        if conservative not in legal:
            raise self.fail(f"conservative_token={conservative!r} is not in legal_tokens ({', '.join(legal)}); "
                            "pick a legal fallback token or add it to legal_tokens")
        margin, probability = self.gate(len(outputs))
        rules = self.rules(inputs, outputs, conservative, known)
        hysteresis = data.get("hysteresis", {})
        overridable = self.overridable(outputs, legal, known)
        return ControllerSpec(
            name=data["name"], description=data.get("description", ""), path=self.path,
            model_path=self.model(require_model), inputs=inputs, outputs=outputs, tokens=tokens,
            legal_tokens=legal, decision=data["decision"], conservative_token=conservative,
            margin=margin, probability=probability, rules=rules,
            confirm_cycles=int(hysteresis.get("confirm_cycles", 1)),
            cooldown_cycles=int(hysteresis.get("cooldown_cycles", 0)),
            sla_paths=self.sla_paths(), overridable=overridable,
        )

    def require_known(self, where: str, token: str, outputs: tuple[str, ...], known: str) -> None:
        if token not in outputs:
            raise self.fail(f"{where}={token!r} is not a known token ({known}); use a name from outputs")

    def require_unique(self, where: str, name: str, seen: dict[str, str]) -> None:
        if name in seen:
            raise self.fail(f"{where}={name!r} repeats {seen[name]}; give each one its own name")
        seen[name] = where

    def inputs(self) -> tuple[InputSpec, ...]:
        result, seen = [], {}
        for i, item in enumerate(self.data["inputs"]):
            at = f"inputs[{i}]"
            self.require_unique(f"{at}.name", item["name"], seen)
            low, high = float(item["min"]), float(item["max"])
            if high < low:
                raise self.fail(f"{at}.max={_show(item['max'])} is below {at}.min={_show(item['min'])}; "
                                "swap them or fix the range")
            if high == low:
                raise self.fail(f"{at}.max={_show(item['max'])} equals {at}.min={_show(item['min'])}; "
                                "the envelope needs min < max, widen the range")
            edges = self.edges(at, item, low, high)
            frac_bits = item.get("frac_bits")
            result.append(InputSpec(item["name"], item["unit"], low, high, edges,
                                    None if frac_bits is None else int(frac_bits)))
        return tuple(result)

    def edges(self, at: str, item: dict, low: float, high: float) -> tuple[float, ...]:
        if "bins" in item:
            bins = int(item["bins"])
            edges = np.linspace(low, high, bins + 1)
            edges[0], edges[-1] = low, high
            if not np.all(np.diff(edges) > 0):
                raise self.fail(f"{at}.bins={bins} gives bin edges that are not strictly increasing in float64 "
                                f"over [{_num(low)}, {_num(high)}]; use fewer bins or a wider range")
            return tuple(float(e) for e in edges)
        raw = item["edges"]
        edges = tuple(float(e) for e in raw)
        last = len(raw) - 1
        if edges[0] != low:
            raise self.fail(f"{at}.edges[0]={_show(raw[0])} differs from {at}.min={_show(item['min'])}; "
                            "the first edge must equal min")
        if edges[-1] != high:
            raise self.fail(f"{at}.edges[{last}]={_show(raw[-1])} differs from {at}.max={_show(item['max'])}; "
                            "the last edge must equal max")
        for k in range(1, len(edges)):
            if not edges[k] > edges[k - 1]:
                raise self.fail(f"{at}.edges[{k}]={_show(raw[k])} is not above {at}.edges[{k - 1}]="
                                f"{_show(raw[k - 1])}; edges must be strictly increasing")
        return edges

    def outputs(self) -> tuple[str, ...]:
        seen: dict[str, str] = {}
        for k, token in enumerate(self.data["outputs"]):
            self.require_unique(f"outputs[{k}]", token, seen)
        return tuple(self.data["outputs"])

    def tokens(self, outputs: tuple[str, ...]) -> dict[str, int]:
        codes = self.data["tokens"]
        for k, token in enumerate(outputs):
            if token not in codes:
                raise self.fail(f"tokens has no code for outputs[{k}]={token!r}; "
                                f"add \"{token}\": <code 0..15> to tokens")
        for token in codes:
            if token not in outputs:
                raise self.fail(f"tokens.{token} names no output (outputs: {', '.join(outputs)}); "
                                f"remove it or add {token!r} to outputs")
        owner: dict[int, str] = {}
        for token in outputs:
            code = int(codes[token])
            if code in owner:
                free = ", ".join(str(c) for c in range(16) if c not in {int(v) for v in codes.values()})
                raise self.fail(f"tokens.{token}={code} repeats the code of tokens.{owner[code]}; "
                                f"give each token its own 4-bit code (unused: {free})")
            owner[code] = token
        return {token: int(codes[token]) for token in outputs}

    def gate(self, n_outputs: int) -> tuple[float | None, float | None]:
        gate = self.data.get("confidence_gate")
        if gate is None:
            return None, None
        if "margin" in gate:
            return float(gate["margin"]), None
        probability = float(gate["probability"])
        margin = margin_from_probability(probability, n_outputs)
        if margin < 0:
            raise self.fail(f"confidence_gate.probability={_show(gate['probability'])} gives the negative logit "
                            f"margin {margin:.6g}: with K={n_outputs} outputs the top softmax probability is "
                            f"always at least 1/K={1 / n_outputs:.6g}; use a probability above 1/K or drop the gate")
        return margin, probability

    def rules(self, inputs, outputs, conservative: str, known: str) -> tuple[LegalityRule, ...]:
        index = {item.name: i for i, item in enumerate(inputs)}
        result, seen = [], {}
        for j, rule in enumerate(self.data.get("legality_rules", [])):
            at = f"legality_rules[{j}]"
            self.require_unique(f"{at}.name", rule["name"], seen)
            lower = [item.min for item in inputs]
            upper = [item.max for item in inputs]
            for name, side in rule["when"].items():
                where = f"{at}.when.{name}"
                if name not in index:
                    raise self.fail(f"{where} names no input (inputs: {', '.join(index)}); use one of the input names")
                i = index[name]
                low, high = float(side.get("min", lower[i])), float(side.get("max", upper[i]))
                if "min" in side and "max" in side and low > high:
                    raise self.fail(f"{where}.min={_show(side['min'])} is above {where}.max={_show(side['max'])}; "
                                    "swap them")
                if high < inputs[i].min or low > inputs[i].max:
                    raise self.fail(f"{where}={json.dumps(side)} misses the envelope "
                                    f"[{_num(inputs[i].min)}, {_num(inputs[i].max)}] of inputs[{i}]; the rule could "
                                    "never apply, fix the range or delete the rule")
                lower[i], upper[i] = max(low, inputs[i].min), min(high, inputs[i].max)
            for k, token in enumerate(rule["forbid"]):
                self.require_known(f"{at}.forbid[{k}]", token, outputs, known)
                if token == conservative:
                    raise self.fail(f"{at}.forbid[{k}]={token!r} is the conservative_token, which the state machine "
                                    "falls back to; remove it from forbid or choose another conservative_token")
            forbid = tuple(t for t in outputs if t in rule["forbid"])
            result.append(LegalityRule(rule["name"], tuple(lower), tuple(upper), forbid))
        return tuple(result)

    def sla_paths(self) -> tuple[SlaPath, ...]:
        result, seen = [], {}
        for j, item in enumerate(self.data.get("sla", {}).get("paths", [])):
            at = f"sla.paths[{j}]"
            self.require_unique(f"{at}.name", item["name"], seen)
            if item["max_violations"] >= item["window"]:
                raise self.fail(f"{at}.max_violations={item['max_violations']} is not below {at}.window="
                                f"{item['window']}, so the path could never be violated; lower max_violations "
                                "or widen the window")
            result.append(SlaPath(item["name"], item["metric"], float(item["limit"]), int(item["window"]),
                                  int(item["max_violations"]), int(item["recovery_cycles"])))
        return tuple(result)

    def overridable(self, outputs, legal, known: str) -> tuple[str, ...]:
        given = self.data.get("overrides", {}).get("overridable", [])
        for k, token in enumerate(given):
            where = f"overrides.overridable[{k}]"
            self.require_known(where, token, outputs, known)
            if token not in legal:
                raise self.fail(f"{where}={token!r} is not in legal_tokens ({', '.join(legal)}); "
                                "an override may force only legal tokens")
        return tuple(t for t in outputs if t in given)

    def model(self, require_model: bool) -> Path:
        given = self.data["model"]
        model_path = Path(os.path.abspath(self.path.parent / given))
        if require_model and not model_path.is_file():
            reason = "is not a file" if model_path.exists() else "does not exist"
            raise self.fail(f"model={given!r} resolves to {model_path}, which {reason}; put the ONNX file there "
                            f"or fix the model path (a relative path starts at the spec file's folder {self.path.parent})")
        return model_path

