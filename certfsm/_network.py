"""The network IR: a frozen list of affine layers with ReLUs between them, read as a DAG.

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

Graphs. Activation 0 is the input and activation k + 1 the ReLU output of
hidden layer k. A layer reads the concatenation of the activations listed
in its `reads` (ascending), by default only the one just before it, so a
chain is the common case and costs nothing extra. Any DAG of affine
operators, Concat, Slice and ReLU folds exactly into this form: every
value between ReLUs is an affine function of earlier activations
(`certfsm._onnx_graph` builds it), so branches that are summed, skip
connections and a plant model beside a policy are layers that read more
than one activation. Engines walk activations forward with `gather`
(dropping what no later layer reads: `last_readers`, `release`) and push
coefficients back with `scatter`.
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
    None means the floats are the exact values. `reads`: the activations
    whose concatenation is x (see the module docstring); None means the
    one just before the layer.
    """

    weight: np.ndarray
    bias: np.ndarray
    source: str
    exact: tuple[ExactRows, tuple[Fraction, ...]] | None = None
    reads: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        weight = frozen_array(self.weight, np.float64)
        bias = frozen_array(self.bias, np.float64).reshape(-1)
        if weight.ndim != 2 or weight.shape[0] != bias.shape[0]:
            raise ValueError(f"{self.source}: weight shape {weight.shape} does not match bias shape {bias.shape}")
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "bias", bias)
        if self.reads is not None:
            object.__setattr__(self, "reads", tuple(int(r) for r in self.reads))
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
        sizes = [self.layers[0].n_in] + [layer.n_out for layer in self.layers[:-1]]
        reads = []
        for index, layer in enumerate(self.layers):
            chosen = (index,) if layer.reads is None else layer.reads
            if not chosen or list(chosen) != sorted(set(chosen)) or chosen[0] < 0 or chosen[-1] > index:
                raise ValueError(
                    f"{layer.source}: reads activations {list(chosen)}; a layer reads one or more earlier "
                    f"activations (0 the input .. {index}), ascending and each once"
                )
            width = sum(sizes[r] for r in chosen)
            if width != layer.n_in:
                if layer.reads is None:
                    raise ValueError(
                        f"{layer.source}: takes {layer.n_in} inputs but {self.layers[index - 1].source} "
                        f"gives {sizes[index]}"
                    )
                raise ValueError(
                    f"{layer.source}: takes {layer.n_in} inputs but activations {list(chosen)} give {width}"
                )
            reads.append(chosen)
        object.__setattr__(self, "_reads", tuple(reads))
        object.__setattr__(self, "_sizes", tuple(sizes))
        if not self.input_shape:
            object.__setattr__(self, "input_shape", (self.n_inputs,))

    @property
    def reads(self) -> tuple[tuple[int, ...], ...]:
        """Per layer, the activations it reads (0 the input, k + 1 hidden layer k's ReLU output)."""
        reads: tuple[tuple[int, ...], ...] = getattr(self, "_reads")
        return reads

    @property
    def activation_sizes(self) -> tuple[int, ...]:
        """The width of every activation: the input, then each hidden layer."""
        sizes: tuple[int, ...] = getattr(self, "_sizes")
        return sizes

    @property
    def is_chain(self) -> bool:
        """True when every layer reads only the activation just before it."""
        return all(chosen == (index,) for index, chosen in enumerate(self.reads))

    def gather(self, index: int, activations: list[Any]) -> Any:
        """Layer `index`'s input: the activations it reads, concatenated along the last axis.

        `activations[r]` is activation r (arrays, or lists of terms for the
        symbolic engines); a chain layer gets its one activation as is.
        """
        chosen = self.reads[index]
        if len(chosen) == 1:
            return activations[chosen[0]]
        parts = [activations[r] for r in chosen]
        if isinstance(parts[0], np.ndarray):
            return np.concatenate(parts, axis=-1)
        return [term for part in parts for term in part]

    def scatter(self, index: int, values: np.ndarray, blocks: list[Any]) -> None:
        """Add the columns of `values` (last axis n_in of layer `index`) into `blocks[r]`, per activation r read.

        A block of no activation yet (None) stands for zeros; the first part
        is stored as is, so a chain copies nothing. Never in place, because a
        part may be a view of the caller's rows.
        """
        start = 0
        for r in self.reads[index]:
            part = values if len(self.reads[index]) == 1 else values[..., start : start + self.activation_sizes[r]]
            start += self.activation_sizes[r]
            blocks[r] = part if blocks[r] is None else blocks[r] + part

    def last_readers(self, count: int | None = None) -> dict[int, int]:
        """Activation -> the last of the first `count` layers (default: all) that reads it.

        A walk up the layers drops an activation's arrays after that layer
        (`release`): holding every layer's arrays until the end costs more
        than the arithmetic on small networks (fresh memory each time, cache
        misses), and so a chain holds no more than one layer's arrays at a
        time.
        """
        count = len(self.layers) if count is None else count
        return {r: index for index in range(count) for r in self.reads[index]}

    def release(self, index: int, readers: dict[int, int], *held: list[Any]) -> None:
        """Forget (set to None) in each list of `held` the activations whose last reader is layer `index`."""
        for r in self.reads[index]:
            if readers[r] == index:
                for values in held:
                    values[r] = None

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
        activations = [np.asarray(x, dtype=np.float64)]
        for index, layer in enumerate(self.layers):
            values: np.ndarray = self.gather(index, activations) @ layer.weight.T + layer.bias
            if index < len(self.layers) - 1:
                values = np.maximum(values, 0.0)
            activations.append(values)
        return values

    def describe(self) -> list[str]:
        """Summary lines of the network for people (``certfsm spec check``), with what its float type means."""
        shape = "" if self.is_chain else f", a graph ({self._skips()})"
        lines = [
            f"model: {self.n_inputs} inputs, {self.n_outputs} outputs, hidden layers {list(self.hidden_sizes)}"
            f"{shape}, computed in {self.input_type} by onnxruntime"
        ]
        if self.input_type == "float16":
            lines.append(
                "model: note: certfsm proves the exact network (its float16 weights read exactly), but onnxruntime "
                "rounds every operation to float16, so near a decision boundary it can decide otherwise: a cell "
                "whose witness onnxruntime does not confirm stays undecided and the cross-check can count "
                "mismatches; export the model in float32 to avoid both"
            )
        return lines

    def _skips(self) -> str:
        """How the layers beyond a chain read, e.g. "layer 2 also reads the input"."""
        names = ["the input"] + [f"layer {k}" for k in range(len(self.layers) - 1)]
        parts = []
        for index, chosen in enumerate(self.reads):
            extra = [names[r] for r in chosen if r != index]
            if extra:
                who = "the output layer" if index == len(self.layers) - 1 else f"layer {index}"
                parts.append(f"{who} {'also ' if index in chosen else ''}reads {', '.join(extra)}")
        return "; ".join(parts)

    def replace(self, **changes: Any) -> "Network":
        """`dataclasses.replace`: a copy with `changes` (field names and values), checked again."""
        return dataclasses.replace(self, **changes)
