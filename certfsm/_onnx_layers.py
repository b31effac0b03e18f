"""From the graph's Relu nodes to the IR's layers: each Relu node at its depth, the nodes of one depth side by side.

The depth of a Relu node is the largest number of Relu nodes on any path
from the input to it, itself included. Hidden layer k holds the Relu
nodes of depth k + 1, in the order of the graph's node list, each node's
neurons in C order: that numbering of the hidden neurons is what proof
certificates name, and the independent checker derives it by the same
rule. Every pre-activation of depth d reads only activations of smaller
depth, so a layer reads earlier activations only, and a chain (one Relu
per depth, each reading the one before) gives the chain's layers exactly.
Relu nodes that the output does not depend on are dropped.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ._errors import ModelError
from ._network import AffineLayer, Network
from ._onnx_fold import Affine


def network_of(
    pre_activations: list[tuple[str, Affine]], output: Affine, input_name: str, shape: tuple[int, ...]
) -> Network:
    """The network whose hidden neurons are the Relu nodes' (`pre_activations[i]` feeds activation i + 1)."""
    used = _used(pre_activations, output)
    depth = {0: 0}
    for number, (_, value) in enumerate(pre_activations, start=1):
        if number in used:
            depth[number] = 1 + max(depth[r] for r in value.reads)
    levels = max(depth.values())
    members = [[n for n in sorted(used) if depth[n] == level] for level in range(1, levels + 1)]
    place = {0: (0, 0)}
    widths = [int(np.prod(shape))]
    for level, numbers in enumerate(members, start=1):
        offset = 0
        for number in numbers:
            place[number] = (level, offset)
            offset += pre_activations[number - 1][1].size
        widths.append(offset)
    layers: list[AffineLayer] = []
    for numbers in members:
        parts = [pre_activations[n - 1] for n in numbers]
        sources = [", ".join("+".join(v.sources) or f"identity before {name}" for name, v in parts)]
        layers.append(_layer([v for _, v in parts], sources[0], place, widths, len(layers)))
    fallback = "identity output layer" if layers else "identity"
    layers.append(_layer([output], "+".join(output.sources) or fallback, place, widths, len(layers)))
    return Network(tuple(layers), input_name=input_name, input_shape=shape)


def _used(pre_activations: list[tuple[str, Affine]], output: Affine) -> set[int]:
    """The Relu activations the output depends on (through other Relu nodes too)."""
    used: set[int] = set()
    waiting = [r for r in output.reads if r]
    while waiting:
        number = waiting.pop()
        if number not in used:
            used.add(number)
            waiting += [r for r in pre_activations[number - 1][1].reads if r]
    return used


def _layer(
    values: list[Affine], source: str, place: dict[int, tuple[int, int]], widths: list[int], index: int
) -> AffineLayer:
    """Layer `index` from the values side by side, its columns laid out over the activations (IR levels) they read."""
    if sum(v.size for v in values) == 0:
        raise ModelError(
            f"{values[0].where}: {source} gives 0 values, so the network would have a layer without "
            "neurons or no outputs; fix the model's weight shapes"
        )
    reads = tuple(sorted({place[r][0] for v in values for r in v.reads}))
    start = dict(zip(reads, np.cumsum([0] + [widths[r] for r in reads[:-1]])))
    n_in = sum(widths[r] for r in reads)
    is_exact = all(v.exact is None for v in values)
    weight, bias = np.zeros((sum(v.size for v in values), n_in)), np.concatenate([v.bias for v in values])
    exact_weight = None if is_exact else np.full(weight.shape, Fraction(0), dtype=object)
    row = 0
    for value in values:
        rows = slice(row, row + value.size)
        column = 0
        for number, width in zip(value.reads, value.widths):
            level, offset = place[number]
            target = slice(start[level] + offset, start[level] + offset + width)
            weight[rows, target] = value.weight[:, column : column + width]
            if exact_weight is not None:
                exact_weight[rows, target] = value.exact_pair()[0][:, column : column + width]
            column += width
        row += value.size
    exact = None
    if exact_weight is not None:
        exact_bias = np.concatenate([v.exact_pair()[1] for v in values])
        exact = (tuple(tuple(r) for r in exact_weight.tolist()), tuple(exact_bias.tolist()))
    return AffineLayer(weight, bias, source, exact, reads=None if reads == (index,) else reads)
