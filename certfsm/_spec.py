"""The controller spec: a JSON file, validated against a JSON Schema, turned into a frozen IR.

This module holds the IR (`ControllerSpec` and its value types) and its
summary `describe_spec`; `certfsm._spec_reading` holds the entry points
that read a spec (`load_spec`, `spec_from_dict`, `check_spec`). Reading
happens in three steps, each of which reports the first problem as one
line naming the file, the JSON path and the fix:

1. plain JSON: the file exists, parses (line and column on a syntax
   error), has no repeated object keys and only finite numbers;
2. the schema (``certfsm/spec.schema.json``, draft 2020-12): shapes,
   types, ranges and unknown keys; its ``description`` fields double as
   the reference documentation and as the fix hint of schema errors;
3. the semantic checks the schema cannot express (envelopes, edges,
   names that must refer to each other, the ONNX file on disk).

Steps 1 and 2 live in `certfsm._spec_schema`, step 3 in
`certfsm._spec_rules` (which builds the types defined here, so the
modules import one way: reading -> rules -> this module).

Invariants of a `ControllerSpec` built here: every input has min < max
and strictly increasing float64 edges from exactly min to exactly max;
token names are unique and each has a unique 4-bit code; the
conservative token is legal and no rule forbids it; every rule box lies
inside the envelope and is non-empty; ``margin`` is None (no gate) or a
finite number >= 0. This module and the two it reads with import neither
onnx, maraboupy nor z3, so the runtime can load specs on a bare target.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import numpy as np

from ._arrays import frozen_array
from ._box_tree import TreeBudget
from ._decision import margin_bounds
from ._errors import SpecError
from ._readonly import ReadOnlyDict
from ._sla_path import SlaPath
from ._spec_schema import show_number
from ._table_size import size_lines

if TYPE_CHECKING:
    from ._network import Network


SPEC_FORMAT_VERSION = 1


class _ReadOnlyDict(ReadOnlyDict):
    """A spec's mapping: read-only so that a frozen spec stays frozen."""

    refusal = "a ControllerSpec mapping is read-only; build a new spec with dataclasses.replace"


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


"""What an SLA path compares with its limit; the windowed ones are defined in `certfsm.sla`."""


@dataclass(frozen=True)
class ControllerSpec:
    """A validated controller spec; build it with `load_spec` or `spec_from_dict`.

    `path` is the absolute path of the spec file and `model_path` the
    absolute path of the ONNX model. `tokens` is a read-only dict from
    token name to 4-bit code, in output order. `legal_tokens`, `overridable` and each
    rule's `forbid` are kept in output-index order, so two specs that
    differ only in the order of those lists compare equal. `margin` is the
    gate's logit margin (a probability threshold already converted);
    `probability` keeps the threshold as written, for reports. `refine`
    is the budget of a refined table (None: flat; docs/design.md, "Box trees").
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
    refine: TreeBudget | None = None
    _index: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "tokens", _ReadOnlyDict(self.tokens))
        object.__setattr__(self, "_index", _ReadOnlyDict((t, k) for k, t in enumerate(self.outputs)))

    @functools.cached_property
    def gate_bounds(self) -> tuple[Fraction, Fraction] | None:
        """The gate's logit margin as exact rational (lower, upper) bounds, None without a gate (`margin_bounds`)."""
        if self.probability is not None:
            return margin_bounds(probability=self.probability, n_tokens=self.n_outputs)
        return margin_bounds(margin=self.margin)

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
        return frozen_array([item.min for item in self.inputs], np.float64)

    @property
    def envelope_upper(self) -> np.ndarray:
        return frozen_array([item.max for item in self.inputs], np.float64)

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
        if self.refine is not None:  # only when given, so that a flat table's spec keeps its bytes
            document["refine"] = {"max_depth": self.refine.max_depth, "max_leaves": self.refine.max_leaves}
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


def _input_json(item: InputSpec) -> dict[str, Any]:
    document: dict[str, Any] = {
        "name": item.name,
        "unit": item.unit,
        "min": item.min,
        "max": item.max,
        "edges": list(item.edges),
    }
    if item.frac_bits is not None:
        document["frac_bits"] = item.frac_bits
    return document


def _sla_json(path: SlaPath) -> dict[str, Any]:
    """A path's canonical form; the optional fields only when they differ from their defaults.

    Leaving the defaults out keeps the bytes, and so the hash, of every
    artifact distilled before `tokens` and `statistic` existed.
    """
    document: dict[str, Any] = {
        "name": path.name,
        "metric": path.metric,
        "limit": path.limit,
        "window": path.window,
        "max_violations": path.max_violations,
        "recovery_cycles": path.recovery_cycles,
    }
    if path.tokens is not None:
        document["tokens"] = list(path.tokens)
    if path.statistic != "value":
        document["statistic"] = path.statistic
    return document


def describe_spec(spec: ControllerSpec, network: Network | None = None) -> list[str]:
    """Human-readable summary lines of a loaded spec; with its `network`, an estimate of the distill's cost too.

    The last lines say what the grid costs (`certfsm._table_size.size_lines`): cells, the table's ROM bits,
    the distill cost class, and the inputs the fixed-point exports still need frac_bits for.
    """
    lines = [f"spec {spec.name!r}: {spec.path}", f"model: {spec.model_path}", f"inputs ({spec.n_inputs}):"]
    for item in spec.inputs:
        unit = f" [{item.unit}]" if item.unit else ""
        fixed = f", frac_bits {item.frac_bits}" if item.frac_bits is not None else ""
        lines.append(
            f"  {item.name}{unit}: {show_number(item.min)} .. {show_number(item.max)}, {item.n_bins} bins "
            f"(edges {', '.join(show_number(e) for e in item.edges)}){fixed}"
        )
    lines.append(f"outputs ({spec.n_outputs}), decision {spec.decision}:")
    for token in spec.outputs:
        status = (
            "conservative"
            if token == spec.conservative_token
            else ("legal" if token in spec.legal_tokens else "NOT legal: must provably never win")
        )
        lines.append(f"  {spec.output_index(token)}: {token} = code {spec.tokens[token]} ({status})")
    if spec.probability is not None:
        lines.append(f"confidence gate: probability {spec.probability:g} -> logit margin {spec.margin:.6g}")
    elif spec.margin is not None:
        lines.append(f"confidence gate: logit margin {spec.margin:.6g}")
    else:
        lines.append("confidence gate: none")
    lines.append(f"legality rules ({len(spec.rules)}):")
    for rule in spec.rules:
        box = [
            f"{item.name} in [{show_number(lo)}, {show_number(hi)}]"
            for item, lo, hi in zip(spec.inputs, rule.lower, rule.upper)
            if (lo, hi) != (item.min, item.max)
        ]
        lines.append(f"  {rule.name}: forbid {', '.join(rule.forbid)} where {' and '.join(box) or 'anywhere'}")
    lines.append(f"hysteresis: confirm {spec.confirm_cycles} cycles, cooldown {spec.cooldown_cycles} cycles")
    lines.append(f"SLA paths ({len(spec.sla_paths)}):")
    for sla in spec.sla_paths:
        measured = sla.metric if sla.statistic == "value" else f"{sla.statistic}({sla.metric})"
        scope = "" if sla.tokens is None else f", on {', '.join(sla.tokens)} only"
        lines.append(
            f"  {sla.name}: {measured} <= {show_number(sla.limit)}, at most {sla.max_violations} violations "
            f"per {sla.window} cycles, recovery {sla.recovery_cycles} cycles{scope}"
        )
    lines.append(f"overridable: {', '.join(spec.overridable) or 'none'}")
    lines += size_lines(spec, network)
    return lines
