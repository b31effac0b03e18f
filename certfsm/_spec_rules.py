"""The semantic checks of a spec: what its JSON Schema cannot express.

The third step of reading a spec, run by `certfsm._spec` on a document
that already passed the plain-JSON and schema checks of
`certfsm._spec_schema` (so every field has the type and shape the schema
gives it). The checks run in document order and raise SpecError on the
first problem, as one line naming the file, the JSON path, the value and
the fix: envelopes and bin edges, unique names and 4-bit codes, token
names that must refer to the outputs, the confidence gate, rule boxes
against the envelope, SLA windows and tokens, and the ONNX file on disk. What passes
is built into a `ControllerSpec` with the invariants stated in
`certfsm._spec`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from ._box_tree import TreeBudget
from ._decision import margin_from_probability
from ._errors import SpecError
from ._sla_path import SlaPath
from ._spec import ControllerSpec, InputSpec, LegalityRule
from ._spec_schema import show_number, show_value
from .machine import reading_thresholds, uniform_edges


class SpecBuilder:
    """The semantic checks, in document order, on a schema-valid document; `build` returns the spec."""

    def __init__(self, data: dict[str, Any], label: str, path: Path) -> None:
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
            raise self.fail(
                f"conservative_token={conservative!r} is not in legal_tokens ({', '.join(legal)}); "
                "pick a legal fallback token or add it to legal_tokens"
            )
        margin, probability = self.gate(len(outputs))
        rules = self.rules(inputs, outputs, conservative, known)
        hysteresis = data.get("hysteresis", {})
        overridable = self.overridable(outputs, legal, known)
        return ControllerSpec(
            name=data["name"],
            description=data.get("description", ""),
            path=self.path,
            model_path=self.model(require_model),
            inputs=inputs,
            outputs=outputs,
            tokens=tokens,
            legal_tokens=legal,
            decision=data["decision"],
            conservative_token=conservative,
            margin=margin,
            probability=probability,
            rules=rules,
            confirm_cycles=int(hysteresis.get("confirm_cycles", 1)),
            cooldown_cycles=int(hysteresis.get("cooldown_cycles", 0)),
            sla_paths=self.sla_paths(outputs, legal, known),
            overridable=overridable,
            refine=self.refine(),
        )

    def refine(self) -> TreeBudget | None:
        """The refined table's budget (the schema holds its ranges); None without a refine object."""
        refine = self.data.get("refine")
        return None if refine is None else TreeBudget(refine["max_depth"], refine["max_leaves"])

    def require_known(self, where: str, token: str, outputs: tuple[str, ...], known: str) -> None:
        if token not in outputs:
            raise self.fail(f"{where}={token!r} is not a known token ({known}); use a name from outputs")

    def require_unique(self, where: str, name: str, seen: dict[str, str]) -> None:
        if name in seen:
            raise self.fail(f"{where}={name!r} repeats {seen[name]}; give each one its own name")
        seen[name] = where

    def inputs(self) -> tuple[InputSpec, ...]:
        result: list[InputSpec] = []
        seen: dict[str, str] = {}
        for i, item in enumerate(self.data["inputs"]):
            at = f"inputs[{i}]"
            self.require_unique(f"{at}.name", item["name"], seen)
            low, high = float(item["min"]), float(item["max"])
            if high < low:
                raise self.fail(
                    f"{at}.max={show_value(item['max'])} is below {at}.min={show_value(item['min'])}; "
                    "swap them or fix the range"
                )
            if high == low:
                raise self.fail(
                    f"{at}.max={show_value(item['max'])} equals {at}.min={show_value(item['min'])}; "
                    "the envelope needs min < max, widen the range"
                )
            edges = self.edges(at, item, low, high)
            frac_bits = item.get("frac_bits")
            result.append(
                InputSpec(item["name"], item["unit"], low, high, edges, None if frac_bits is None else int(frac_bits))
            )
        return tuple(result)

    def edges(self, at: str, item: dict[str, Any], low: float, high: float) -> tuple[float, ...]:
        edges = self.given_edges(at, item, low, high)
        thresholds = reading_thresholds(edges)
        for k in range(len(edges) - 1):
            if not thresholds[k] < thresholds[k + 1]:
                if "bins" in item:  # the user gave no edges to drop: the count is what to change
                    raise self.fail(self.too_many_bins(at, int(item["bins"]), low, high))
                raise self.fail(
                    f"{at}: the bin [{show_number(edges[k])}, {show_number(edges[k + 1])}] holds no "
                    "float64 reading (its edges lie between the same two float64 values); widen it or "
                    "drop one of its edges"
                )
        return edges

    @staticmethod
    def too_many_bins(at: str, bins: int, low: float, high: float) -> str:
        return (
            f"{at}.bins={bins} gives bins that hold no float64 reading over [{show_number(low)}, "
            f"{show_number(high)}] (the range is too narrow for that many); use fewer bins or a wider range"
        )

    def given_edges(self, at: str, item: dict[str, Any], low: float, high: float) -> tuple[float, ...]:
        if "bins" in item:
            bins = int(item["bins"])
            if bins > 1 and not math.isfinite(high - low):
                raise self.fail(
                    f"{at}.bins={bins}: max - min over [{show_number(low)}, {show_number(high)}] "
                    "overflows float64, so the bins' edges cannot be computed; narrow the range or give "
                    "edges"
                )
            edges = uniform_edges(low, high, bins)
            if not all(a < b for a, b in zip(edges, edges[1:])):
                raise self.fail(self.too_many_bins(at, bins, low, high))
            return edges
        raw = item["edges"]
        edges = tuple(float(e) for e in raw)
        last = len(raw) - 1
        if edges[0] != low:
            raise self.fail(
                f"{at}.edges[0]={show_value(raw[0])} differs from {at}.min={show_value(item['min'])}; "
                "the first edge must equal min"
            )
        if edges[-1] != high:
            raise self.fail(
                f"{at}.edges[{last}]={show_value(raw[-1])} differs from "
                f"{at}.max={show_value(item['max'])}; the last edge must equal max"
            )
        for k in range(1, len(edges)):
            if not edges[k] > edges[k - 1]:
                raise self.fail(
                    f"{at}.edges[{k}]={show_value(raw[k])} is not above {at}.edges[{k - 1}]="
                    f"{show_value(raw[k - 1])}; edges must be strictly increasing"
                )
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
                raise self.fail(f'tokens has no code for outputs[{k}]={token!r}; add "{token}": <code 0..15> to tokens')
        for token in codes:
            if token not in outputs:
                raise self.fail(
                    f"tokens.{token} names no output (outputs: {', '.join(outputs)}); "
                    f"remove it or add {token!r} to outputs"
                )
        owner: dict[int, str] = {}
        for token in outputs:
            code = int(codes[token])
            if code in owner:
                free = ", ".join(str(c) for c in range(16) if c not in {int(v) for v in codes.values()})
                raise self.fail(
                    f"tokens.{token}={code} repeats the code of tokens.{owner[code]}; "
                    f"give each token its own 4-bit code (unused: {free})"
                )
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
            raise self.fail(
                f"confidence_gate.probability={show_value(gate['probability'])} gives the negative logit "
                f"margin {margin:.6g}: with K={n_outputs} outputs the top softmax probability is "
                f"always at least 1/K={1 / n_outputs:.6g}; use a probability above 1/K or drop the gate"
            )
        return margin, probability

    def rules(
        self, inputs: tuple[InputSpec, ...], outputs: tuple[str, ...], conservative: str, known: str
    ) -> tuple[LegalityRule, ...]:
        index = {item.name: i for i, item in enumerate(inputs)}
        result: list[LegalityRule] = []
        seen: dict[str, str] = {}
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
                    raise self.fail(
                        f"{where}.min={show_value(side['min'])} is above "
                        f"{where}.max={show_value(side['max'])}; swap them"
                    )
                if high < inputs[i].min or low > inputs[i].max:
                    raise self.fail(
                        f"{where}={json.dumps(side)} misses the envelope "
                        f"[{show_number(inputs[i].min)}, {show_number(inputs[i].max)}] of inputs[{i}]; "
                        "the rule could never apply, fix the range or delete the rule"
                    )
                lower[i], upper[i] = max(low, inputs[i].min), min(high, inputs[i].max)
            for k, token in enumerate(rule["forbid"]):
                self.require_known(f"{at}.forbid[{k}]", token, outputs, known)
                if token == conservative:
                    raise self.fail(
                        f"{at}.forbid[{k}]={token!r} is the conservative_token, which the state machine "
                        "falls back to; remove it from forbid or choose another conservative_token"
                    )
            forbid = tuple(t for t in outputs if t in rule["forbid"])
            result.append(LegalityRule(rule["name"], tuple(lower), tuple(upper), forbid))
        return tuple(result)

    def sla_paths(self, outputs: tuple[str, ...], legal: tuple[str, ...], known: str) -> tuple[SlaPath, ...]:
        result: list[SlaPath] = []
        seen: dict[str, str] = {}
        for j, item in enumerate(self.data.get("sla", {}).get("paths", [])):
            at = f"sla.paths[{j}]"
            self.require_unique(f"{at}.name", item["name"], seen)
            if item["max_violations"] >= item["window"]:
                raise self.fail(
                    f"{at}.max_violations={item['max_violations']} is not below {at}.window="
                    f"{item['window']}, so the path could never be violated; lower max_violations "
                    "or widen the window"
                )
            tokens = None
            if "tokens" in item:
                for k, token in enumerate(item["tokens"]):
                    self.require_known(f"{at}.tokens[{k}]", token, outputs, known)
                    if token not in legal:
                        raise self.fail(
                            f"{at}.tokens[{k}]={token!r} is not in legal_tokens ({', '.join(legal)}), "
                            "so the path would never apply; name tokens the machine can emit"
                        )
                tokens = tuple(t for t in outputs if t in item["tokens"])
            result.append(
                SlaPath(
                    item["name"],
                    item["metric"],
                    float(item["limit"]),
                    int(item["window"]),
                    int(item["max_violations"]),
                    int(item["recovery_cycles"]),
                    tokens=None if tokens == legal else tokens,
                    statistic=item.get("statistic", "value"),
                )
            )
        return tuple(result)

    def overridable(self, outputs: tuple[str, ...], legal: tuple[str, ...], known: str) -> tuple[str, ...]:
        given = self.data.get("overrides", {}).get("overridable", [])
        for k, token in enumerate(given):
            where = f"overrides.overridable[{k}]"
            self.require_known(where, token, outputs, known)
            if token not in legal:
                raise self.fail(
                    f"{where}={token!r} is not in legal_tokens ({', '.join(legal)}); "
                    "an override may force only legal tokens"
                )
        return tuple(t for t in outputs if t in given)

    def model(self, require_model: bool) -> Path:
        given = self.data["model"]
        model_path = Path(os.path.abspath(self.path.parent / given))
        try:
            is_file = model_path.is_file()
            exists = is_file or model_path.exists()
        except OSError as error:  # a name too long for the file system, a path through a file, ...
            raise self.fail(
                f"model={given[:80]!r} cannot be looked up ({error.strerror}); give the path of an ONNX file"
            ) from None
        if require_model and not is_file:
            reason = "is not a file" if exists else "does not exist"
            raise self.fail(
                f"model={given!r} resolves to {_printable(model_path)}, which {reason}; put the ONNX file "
                "there or fix the model path (a relative path starts at the spec file's folder "
                f"{_printable(self.path.parent)})"
            )
        return model_path


def _printable(path: Path) -> str:
    """A path for a one-line message: as it is, or quoted with escapes where it holds a newline or another control."""
    text = str(path)
    return text if text.isprintable() else repr(text)
