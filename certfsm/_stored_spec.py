"""The spec an artifact stores, decoded once: what the runtime, the export and ``certfsm inspect`` read of it.

An artifact keeps the spec document it was distilled from
(``ControllerSpec.to_json()``) inside its hashed payload. The loader's
reading of the payload (`certfsm._artifact_spec.read_spec`) checks that
document against the grid and the machine and returns it as one
`StoredSpec`; `Artifact.stored_spec` holds it and every reader uses its
attributes, so no reader walks the document again. `Artifact.spec` stays
the document as hashed, for whoever needs the whole of it (``inspect
--deep`` rebuilds the full `certfsm.ControllerSpec` from it).

Standard library only, like every module the artifact loader imports: the
full `certfsm.ControllerSpec` needs jsonschema, which a runtime-only
install does not carry.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._box_tree import TreeBudget
from ._sla_path import SlaPath


@dataclass(frozen=True)
class RuleBox:
    """One legality rule as the spec loader builds it: a closed box clipped to the envelope, forbidden tokens as bits."""

    name: str
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    forbidden: int


@dataclass(frozen=True)
class StoredInput:
    """One input of a stored spec: its name, unit ('' when the spec gives none), envelope and fixed-point bits."""

    name: str
    unit: str
    min: float
    max: float
    frac_bits: int | None


@dataclass(frozen=True)
class StoredSpec:
    """An artifact's spec as the loader read and checked it; output indices are the network's outputs.

    Invariants (the loader refuses a payload that breaks them): `outputs`
    are unique and `codes` holds their distinct 4-bit codes in the same
    order; `legal` lists the indices of ``legal_tokens`` and holds
    `conservative` and every index of `overridable` (ascending);
    `confirm_cycles` >= 1 and `cooldown_cycles` >= 0, equal to the
    machine's; `rules` are the legality rules clipped to the envelope
    (docs/semantics.md, "Legality rules"); `gate_margin` is the confidence
    gate's logit margin (None: no gate; docs/semantics.md, "Confidence
    gate"). `refine` is the spec's budget for refined tables (None: the
    table is flat; docs/design.md, "Box trees"). `sla_paths` are read for their shape only; `certfsm.sla` checks
    what they mean when it builds a monitor (`SlaMonitor.from_spec`).
    """

    name: str
    decision: str | None
    inputs: tuple[StoredInput, ...]
    outputs: tuple[str, ...]
    codes: tuple[int, ...]
    legal: tuple[int, ...]
    conservative: int
    confirm_cycles: int
    cooldown_cycles: int
    overridable: tuple[int, ...]
    rules: tuple[RuleBox, ...]
    gate_margin: float | None
    sla_paths: tuple[SlaPath, ...]
    refine: TreeBudget | None = None

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(item.name for item in self.inputs)

    @property
    def units(self) -> tuple[str, ...]:
        return tuple(item.unit for item in self.inputs)

    @property
    def legal_tokens(self) -> tuple[str, ...]:
        return tuple(self.outputs[k] for k in self.legal)

    @property
    def legal_mask(self) -> int:
        """Bit k set when output k is legal."""
        return sum(1 << k for k in set(self.legal))

    @property
    def conservative_token(self) -> str:
        return self.outputs[self.conservative]

    @property
    def overridable_tokens(self) -> tuple[str, ...]:
        return tuple(self.outputs[k] for k in self.overridable)
