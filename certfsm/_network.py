"""The network IR: a frozen stack of affine layers with ReLUs between them.

Everything in `verify/` and `fsm/` speaks of this IR, never of ONNX: it is
the single source of truth for what was verified. Weights are float64
arrays; when they come straight from a float32 ONNX file they hold the
float32 values exactly. A layer folded from several ONNX operators (a
normalisation merged into the next matrix product, a division) may have
exact values that no float64 holds: it then keeps them as rationals
(`AffineLayer.exact`) beside the nearest floats, with a bound on the
difference that the bound propagation adds to its rounding slack. So the
network verified is always the real-valued function of the stored ONNX
weights read exactly (docs/semantics.md, "The network").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias

import numpy as np

from ._arrays import frozen_array
from ._decimal import float_at_least

ExactRows: TypeAlias = tuple[tuple[Fraction, ...], ...]
"""A layer's exact weights: one tuple of Fractions per output row."""


@dataclass(frozen=True, eq=False)
class AffineLayer:
    """y = weight @ x + bias, with where it came from in the ONNX file.

    Invariant: weight has shape (n_out, n_in), bias (n_out,), both float64
    and finite, and neither array is writeable (the IR is frozen).
    `exact`, when the floats only approximate the layer, holds its exact
    rational weights and biases ``(rows, bias)`` (tuples of Fractions);
    None means the floats are the exact values.
    """

    weight: np.ndarray
    bias: np.ndarray
    source: str
    exact: tuple[ExactRows, tuple[Fraction, ...]] | None = None

    def __post_init__(self) -> None:
        weight = frozen_array(self.weight, np.float64)
        bias = frozen_array(self.bias, np.float64).reshape(-1)
        if weight.ndim != 2 or weight.shape[0] != bias.shape[0]:
            raise ValueError(f"{self.source}: weight shape {weight.shape} does not match bias shape {bias.shape}")
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "bias", bias)
        if self.exact is not None:
            rows, constants = self.exact
            if (
                len(rows) != weight.shape[0]
                or any(len(row) != weight.shape[1] for row in rows)
                or len(constants) != bias.shape[0]
            ):
                raise ValueError(f"{self.source}: exact weights do not have the shape {weight.shape}")
        object.__setattr__(self, "_error", self._measured_error())

    @property
    def is_exact(self) -> bool:
        """True when the float64 weights are the layer's exact values."""
        return self.exact is None

    def exact_weight(self) -> ExactRows:
        """The exact weights, one tuple of Fractions per output row."""
        if self.exact is not None:
            return self.exact[0]
        return tuple(tuple(Fraction(float(w)) for w in row) for row in self.weight)

    def exact_bias(self) -> tuple[Fraction, ...]:
        """The exact biases, a tuple of Fractions."""
        if self.exact is not None:
            return self.exact[1]
        return tuple(Fraction(float(b)) for b in self.bias)

    def rounding_error(self) -> tuple[np.ndarray, np.ndarray] | None:
        """Upper bounds (float64) on |exact - float| of every weight and bias; None for an exact layer."""
        return getattr(self, "_error", None)

    def _measured_error(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self.exact is None:
            return None
        rows, constants = self.exact
        weight = np.array(
            [
                [float_at_least(abs(e - Fraction(float(w)))) for e, w in zip(row, floats)]
                for row, floats in zip(rows, self.weight)
            ]
        )
        bias = np.array([float_at_least(abs(e - Fraction(float(b)))) for e, b in zip(constants, self.bias)])
        return weight.reshape(self.weight.shape), bias

    @property
    def n_in(self) -> int:
        return int(self.weight.shape[1])

    @property
    def n_out(self) -> int:
        return int(self.weight.shape[0])


@dataclass(frozen=True, eq=False)
class Network:
    """A feed-forward ReLU network: ReLU after every layer except the last.

    `input_name` and `input_shape` say how to feed the original ONNX model
    (for the onnxruntime cross-check of counterexamples), `input_type` in
    which float type onnxruntime computes it ("float32", "float64" or
    "float16": the proofs are about the exact network whatever it is, but
    onnxruntime's float16 rounding can disagree with it near a decision
    boundary); `source_path` and `sha256` identify that file.
    """

    layers: tuple[AffineLayer, ...]
    input_name: str = "input"
    input_shape: tuple[int, ...] = ()
    input_type: str = "float32"
    source_path: str = ""
    sha256: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        if not self.layers:
            raise ValueError("a network needs at least one affine layer")
        for previous, layer in zip(self.layers, self.layers[1:]):
            if previous.n_out != layer.n_in:
                raise ValueError(
                    f"{layer.source}: takes {layer.n_in} inputs but {previous.source} gives {previous.n_out}"
                )
        if not self.input_shape:
            object.__setattr__(self, "input_shape", (self.n_inputs,))

    @property
    def n_inputs(self) -> int:
        return self.layers[0].n_in

    @property
    def n_outputs(self) -> int:
        return self.layers[-1].n_out

    @property
    def hidden_sizes(self) -> tuple[int, ...]:
        return tuple(layer.n_out for layer in self.layers[:-1])

    @property
    def is_exact(self) -> bool:
        """True when every layer's float64 weights are its exact values (no rounded fold)."""
        return all(layer.is_exact for layer in self.layers)

    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """Scores for one input (shape (n_inputs,)) or a batch (shape (N, n_inputs)), in float64."""
        values = np.asarray(x, dtype=np.float64)
        for index, layer in enumerate(self.layers):
            values = values @ layer.weight.T + layer.bias
            if index < len(self.layers) - 1:
                values = np.maximum(values, 0.0)
        return values

    def describe(self) -> list[str]:
        """Summary lines of the network for people (``certfsm spec check``), with what its float type means."""
        lines = [
            f"model: {self.n_inputs} inputs, {self.n_outputs} outputs, hidden layers {list(self.hidden_sizes)}, "
            f"computed in {self.input_type} by onnxruntime"
        ]
        if self.input_type == "float16":
            lines.append(
                "model: note: certfsm proves the exact network (its float16 weights read exactly), but onnxruntime "
                "rounds every operation to float16, so near a decision boundary it can decide otherwise: a cell "
                "whose witness onnxruntime does not confirm stays undecided and the cross-check can count "
                "mismatches; export the model in float32 to avoid both"
            )
        return lines

    def replace(self, **changes: Any) -> "Network":
        """`dataclasses.replace`: a copy with `changes` (field names and values), checked again."""
        return dataclasses.replace(self, **changes)
