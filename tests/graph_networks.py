"""Random graph-shaped networks (layers that read several earlier activations) for the engine tests.

Why: every engine must give the same answers on a DAG as on a chain, and
the conformance and soundness suites need DAGs whose exact answers are
known. A graph here is the IR's own form (`AffineLayer.reads`): each
layer reads the activation before it and, at random, the input or other
earlier activations, the shapes that summed branches, skip connections
and a plant model beside a policy fold into.
"""

from __future__ import annotations

import numpy as np

from certfsm import AffineLayer, Network


def random_reads(rng: np.random.Generator, index: int, skip: float) -> tuple[int, ...]:
    """Activation `index` (the one just before layer `index`) and each earlier one with probability `skip`."""
    chosen = {index} | {r for r in range(index) if rng.random() < skip}
    return tuple(sorted(chosen))


def random_graph(
    rng: np.random.Generator,
    n_inputs: int,
    hidden: list[int],
    n_outputs: int,
    skip: float = 0.5,
    grid: float | None = None,
) -> Network:
    """A float32 ReLU network whose layers read random earlier activations (at least one layer skips).

    `grid`: weights and biases on multiples of it (few bits, so exact
    arithmetic stays small). The last layer always reads the input too
    when no other layer skips, so the result is never a chain.
    """
    sizes = [n_inputs] + list(hidden)
    widths = list(hidden) + [n_outputs]
    layers = []
    for index, n_out in enumerate(widths):
        reads = random_reads(rng, index, skip)
        if (
            index == len(widths) - 1
            and index > 0
            and all(len(layer.reads) == 1 for layer in layers)
            and len(reads) == 1
        ):
            reads = (0, index)
        n_in = sum(sizes[r] for r in reads)
        weight = rng.normal(0.0, 1.0 / np.sqrt(n_in), (n_out, n_in))
        bias = rng.normal(0.0, 0.3, n_out)
        if grid is not None:
            weight, bias = np.round(weight / grid) * grid, np.round(bias / grid) * grid
        layers.append(AffineLayer(weight.astype(np.float32), bias.astype(np.float32), f"layer{index}", reads=reads))
    return Network(tuple(layers))
