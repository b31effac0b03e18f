"""Falsification: search the input box for a point whose outputs are unsafe.

Why: a violated property is found far faster by attack than by proof
search, and a concrete point is the only thing `violated` may rest on.
Everything is vectorised numpy over batches of points:

1. the box centre, its corners (a random subset when there are many),
   the face centres and random samples, half of them uniform and half
   with some coordinates snapped to a face of the box;
2. projected gradient ascent with sign steps (PGD) on the unsafe slack
   from the best of them, with several restarts. For a ReLU network the
   gradient of a linear function of the outputs is the product of the
   weight matrices masked by the activation pattern, so no autodiff
   library is needed.

With a `Region` (the open boxes of a branch and bound, each with a
weight), seeds and random samples are drawn inside those boxes instead,
in proportion to the weights: effort goes where the bounds still allow a
counterexample, and none to the parts already proved; the ascent itself
may leave them (any point of the property's box is a valid answer).

The search is deterministic given `rng`'s seed; the time budget only
decides how far along that fixed sequence it gets. A point is returned
only when its float64 slack is >= 0; the search keeps ascending for a few
more steps to push it deeper into the unsafe set (so that it survives the
float32 evaluation of onnxruntime). The caller validates it
(`_validate.validate_counterexample`) before calling anything violated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from certfsm import Network

from ._property import Property

RANDOM_BATCH = 4096
MAX_CORNERS = 1024
PGD_STEPS = 50
PGD_STARTS = 64
ELITE = 256
ELITE_STARTS = 16
STEP_SCHEDULES = ((0.1, 1e-3), (0.01, 1e-4), (1e-3, 1e-5))
DEEPEN_STEPS = 8
SNAP = 0.25


def _forward(network: Network, x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Outputs (N, n_out) and the activation masks (N, n_k) of every hidden layer."""
    activations = [x]
    masks = []
    readers = network.last_readers()
    for index, layer in enumerate(network.layers):
        values = network.gather(index, activations) @ layer.weight.T + layer.bias
        network.release(index, readers, activations)
        if index < len(network.layers) - 1:
            mask = values > 0.0
            masks.append(mask)
            values = np.where(mask, values, 0.0)
        activations.append(values)
    return values, masks


def _ascent_direction(prop: Property, outputs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slack (N,) and an ascent direction of the slack in output space (N, n_out).

    For each point the best disjunct (largest slack) is followed; within it,
    when some rows are violated the direction lowers all violated rows at
    once (the gradient of minus the summed violation), otherwise it lowers
    the tightest row (the gradient of the slack itself).
    """
    count = outputs.shape[0]
    best_slack = np.full(count, -np.inf)
    direction = np.zeros_like(outputs)
    for conjunction in prop.unsafe:
        row_slack = conjunction.b - outputs @ conjunction.A.T
        slack = np.min(row_slack, axis=1)
        violated = row_slack < 0.0
        towards = -(violated.astype(np.float64) @ conjunction.A)
        tightest = -conjunction.A[np.argmin(row_slack, axis=1)]
        candidate = np.where(np.any(violated, axis=1)[:, None], towards, tightest)
        better = slack > best_slack
        best_slack = np.where(better, slack, best_slack)
        direction = np.where(better[:, None], candidate, direction)
    return best_slack, direction


def slack_and_gradient(network: Network, prop: Property, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unsafe slack (N,) of each point and an ascent direction in input space (N, n_in)."""
    outputs, masks = _forward(network, x)
    slack, direction = _ascent_direction(prop, outputs)
    # one gradient per activation (0 the input); a layer's is split among the activations it reads
    gradients: list = [None] * len(network.layers) + [direction]
    for index in range(len(network.layers) - 1, -1, -1):
        gradient, gradients[index + 1] = gradients[index + 1], None
        if gradient is None:
            continue
        if index < len(network.layers) - 1:
            gradient = gradient * masks[index]
        network.scatter(index, gradient @ network.layers[index].weight, gradients)
    return slack, gradients[0]


def local_search(
    network: Network, prop: Property, x: np.ndarray, steps: int, first_step: float = 0.1, last_step: float = 1e-3
) -> tuple[np.ndarray, np.ndarray]:
    """Sign-gradient ascent on the slack from each row of x, staying in the box.

    Step sizes (fractions of the box width per input) shrink geometrically
    from `first_step` to `last_step`. Returns the best point seen for each
    start and its slack.
    """
    width = prop.upper - prop.lower
    x = np.clip(np.atleast_2d(np.asarray(x, dtype=np.float64)), prop.lower, prop.upper)
    best_x = x.copy()
    best_slack = np.full(x.shape[0], -np.inf)
    for step in np.geomspace(first_step, last_step, max(steps, 1)):
        slack, gradient = slack_and_gradient(network, prop, x)
        better = slack > best_slack
        best_x[better], best_slack[better] = x[better], slack[better]
        x = np.clip(x + step * width * np.sign(gradient), prop.lower, prop.upper)
    slack = prop.unsafe_slack(network.evaluate(x))
    better = slack > best_slack
    best_x[better], best_slack[better] = x[better], slack[better]
    return best_x, best_slack


@dataclass(frozen=True, eq=False)
class Region:
    """Boxes to attack (`lower`, `upper` (K, n), inside the property's box) and their weights (K,), > 0."""

    lower: np.ndarray
    upper: np.ndarray
    weight: np.ndarray

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """`count` points: a box chosen in proportion to its weight, then uniform in it, half snapped as in the box attack."""
        chosen = rng.choice(len(self.weight), size=count, p=self.weight / self.weight.sum())
        lower, upper = self.lower[chosen], self.upper[chosen]
        points = rng.uniform(lower, upper)
        half = count // 2
        coin = rng.uniform(size=(count - half, lower.shape[1]))
        points[half:] = np.where(coin < SNAP, lower[half:], np.where(coin > 1.0 - SNAP, upper[half:], points[half:]))
        return points


def _seed_points(prop: Property, rng: np.random.Generator) -> np.ndarray:
    """Centre, corners (all, or a random subset), face centres and one random batch."""
    lower, upper = prop.lower, prop.upper
    n = prop.n_inputs
    centre = (lower + upper) / 2.0
    if 2**n <= MAX_CORNERS:
        bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    else:
        bits = rng.integers(0, 2, size=(MAX_CORNERS, n))
    corners = np.where(bits == 1, upper, lower)
    faces = np.repeat(centre[None], 2 * n, axis=0)
    faces[np.arange(n), np.arange(n)] = lower
    faces[n + np.arange(n), np.arange(n)] = upper
    return np.concatenate([centre[None], corners, faces, _random_points(prop, rng, RANDOM_BATCH)])


def _random_points(prop: Property, rng: np.random.Generator, count: int, region: Region | None = None) -> np.ndarray:
    """Uniform points of the box; in the second half each coordinate sits on a bound with probability SNAP each.

    Violations of ACAS Xu style properties often touch a face of the box
    (one input at its extreme); uniform sampling almost never lands there.
    With a `region`, the points come from its boxes instead.
    """
    if region is not None:
        return region.sample(rng, count)
    points = rng.uniform(prop.lower, prop.upper, size=(count, prop.n_inputs))
    half = count // 2
    coin = rng.uniform(size=(count - half, prop.n_inputs))
    points[half:] = np.where(coin < SNAP, prop.lower, np.where(coin > 1.0 - SNAP, prop.upper, points[half:]))
    return points


def falsify(
    network: Network,
    prop: Property,
    budget_seconds: float = 0.5,
    rng: np.random.Generator | int | None = 0,
    region: Region | None = None,
) -> np.ndarray | None:
    """A point of the box whose float64 outputs are unsafe, or None if none was found in the budget.

    Rounds alternate between step schedules (coarse steps cross the box,
    fine ones climb the thin ridges where several output constraints meet)
    and start from the best points seen so far plus fresh random ones; each
    round also evaluates a new random batch. The returned point has slack
    >= 0 in float64 and has been pushed deeper into the unsafe set by a few
    extra ascent steps; it is not yet validated against onnxruntime.
    `region`: attack these boxes of the property's box (see `Region`).
    """
    if not prop.unsafe:
        return None
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    deadline = time.monotonic() + budget_seconds
    if region is None:
        elite = _seed_points(prop, rng)
    else:
        centres = (region.lower + region.upper) / 2.0
        elite = np.concatenate([centres, region.sample(rng, RANDOM_BATCH)])
    elite_slack = prop.unsafe_slack(network.evaluate(elite))
    round_index = 0
    while True:
        if np.max(elite_slack) >= 0.0:
            return _deepen(network, prop, elite[np.argmax(elite_slack)])
        if time.monotonic() >= deadline:
            return None
        order = np.argsort(elite_slack)
        elite, elite_slack = elite[order[-ELITE:]], elite_slack[order[-ELITE:]]
        samples = _random_points(prop, rng, RANDOM_BATCH, region)
        samples_slack = prop.unsafe_slack(network.evaluate(samples))
        fresh = samples[np.argsort(samples_slack)[-(PGD_STARTS - ELITE_STARTS) :]]
        starts = np.concatenate([elite[-ELITE_STARTS:], fresh])
        first_step, last_step = STEP_SCHEDULES[round_index % len(STEP_SCHEDULES)]
        found, found_slack = local_search(network, prop, starts, PGD_STEPS, first_step, last_step)
        elite = np.concatenate([elite, found, samples])
        elite_slack = np.concatenate([elite_slack, found_slack, samples_slack])
        round_index += 1


def _deepen(network: Network, prop: Property, x: np.ndarray) -> np.ndarray:
    """A few small ascent steps from an unsafe point; keeps the point with the largest slack."""
    deeper, slack = local_search(network, prop, x[None], DEEPEN_STEPS, first_step=1e-3, last_step=1e-6)
    start_slack = prop.unsafe_slack(network.evaluate(x[None]))[0]
    return deeper[0] if slack[0] >= start_slack else x
