"""Generate the embedded co-adaptation example controllers (ONNX + spec JSON).

Run ``python -m certfsm.examples.make_example [--out DIR]`` (by default it
overwrites the shipped files next to this script). The script is
deterministic: a fixed seed, mini-batch training in float64 with plain
numpy (softmax cross-entropy, hinge terms and Adam), and weights rounded
to multiples of 2^-6 before they are written as float32. The rounding
makes the output insensitive to last-bit differences between BLAS or libm
builds, so running it again gives byte-identical files; the test suite
checks that against the shipped files.

The network is deliberately small (two hidden layers of 8) and all its
numbers are short binary fractions (weights on the 2^-6 grid, the input
scale a power of two, so folding the normalisation keeps them short):
an auditor re-runs every SMT-LIB proof of the example with stock z3 in
seconds, where exact rational arithmetic on a 2x24 network with full
float32 weights did not finish in minutes. The axis-aligned first layer
below leaves 8 of its 40 weights non-zero, which shortens those proofs
further (z3 re-runs the six proofs of ``certfsm verify --example`` in
about 2 s, against almost half a minute for the earlier dense first layer).

The example is also meant to distil well: most of its grid cells should
certify as exact (one gated decision for the whole cell). Three choices
serve that:

- The expert policy compares one probe at a time against a threshold,
  so its decision boundaries are axis-aligned planes. A dense first
  layer learns slanted boundaries that cross many cells; here each
  first-layer unit reads one probe only (``EXPERT_THRESHOLDS``) and starts
  as a steep ramp at one threshold of the policy, and training never
  gives it a second input. The boundaries stay near the policy's planes,
  and interval bounds over a cell are exact on the first layer, so bound
  propagation decides most cells without a solver.
- The confidence gate falls back to KEEP where the top logit beats the
  runner-up by less than 0.5; cross-entropy alone leaves that band wide.
  A hinge term asks the label's logit to beat every other by
  ``LABEL_MARGIN`` (4x the gate's margin), so the band is thin.
- The grid (``INPUTS``) puts a thin guard bin around each place where the
  trained network changes its decision, so the other cells lie on one
  side of every boundary.

Two variants are written:

- ``coadapt``: trained from an expert policy that obeys both legality
  rules with a wide buffer, plus hinge penalties that push the forbidden
  logit far below the best legal one inside (and slightly beyond) each
  rule box, and the retired SPARSE_2_4 head far below everywhere. The
  spec's token-range and legality properties are provable for it.
- ``coadapt_unsafe``: the same, except that its policy ignores the
  "no INT4 at 85 degC and above" rule (INT4 whenever bandwidth-bound), so
  that rule is violated in a large region with a wide margin.

The network takes physical units: the ONNX graph subtracts the envelope
centre and divides by a power of two at least the half-width (Sub, Div)
before the first Gemm, so loaders must fold the normalisation into the
first layer.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from dataclasses import dataclass

import numpy as np

# (name, unit, min, max, edges, frac_bits). Each edge is exact in the input's fixed point
# (a multiple of 2^-frac_bits), so integer binning in hardware equals real binning. The thin
# bins are guards around the places where the trained network changes its decision, one per
# threshold of `expert_labels` (compute 60 and 85 %, mem_bw 45, 50 and 65 %, L2 misses 60 %,
# 75 degC, queue 40): [59.5, 60.75), [83.75, 86.25), [43.5, 45.75), [48.5, 53.5), [63.5, 67),
# [58, 61.5), [73, 75.5), [38, 42). The legality thresholds 85 degC and 56 requests are edges,
# so the allowed-token masks are exact. The other edges only split long stretches between
# guards (no bin spans more than 40 % of its range); splitting a cell never loses exactness.
INPUTS = (
    ("compute_util", "%", 0, 100, [0, 20, 40, 59.5, 60.75, 72, 83.75, 86.25, 100], 6),
    ("mem_bw_util", "%", 0, 100, [0, 20, 43.5, 45.75, 48.5, 53.5, 63.5, 67, 80, 100], 6),
    ("l2_miss_rate", "%", 0, 100, [0, 30, 58, 61.5, 100], 6),
    ("temperature", "degC", 20, 110, [20, 50, 73, 75.5, 85, 110], 4),
    ("queue_depth", "requests", 0, 64, [0, 20, 38, 42, 56, 64], 0),
)
OUTPUTS = ("KEEP", "FUSE_CONV", "INT4", "OFFLOAD_CPU", "SPARSE_2_4")
LEGAL_TOKENS = OUTPUTS[:4]
KEEP, FUSE_CONV, INT4, OFFLOAD_CPU, SPARSE_2_4 = range(len(OUTPUTS))
COMPUTE, MEM_BW, L2_MISS, TEMPERATURE, QUEUE_DEPTH = range(len(INPUTS))
HOT_MIN = 85.0
QUEUE_FULL_MIN = 56.0

LOWER = np.array([spec[2] for spec in INPUTS], dtype=np.float64)
UPPER = np.array([spec[3] for spec in INPUTS], dtype=np.float64)
# Centre of the envelope and a power-of-two scale covering its half-width:
# exact binary numbers, so the normalisation the ONNX graph performs is
# exactly the one trained with, and folding it keeps weights dyadic.
MEAN = (LOWER + UPPER) / 2.0
STD = 2.0 ** np.ceil(np.log2((UPPER - LOWER) / 2.0))

# One first-layer unit per threshold of `expert_labels`: (input index, threshold in its unit).
# Unit k reads that input only and starts as a ramp of slope INITIAL_SLOPE (in normalised
# units) that crosses zero at the threshold; training keeps its other weights at zero.
EXPERT_THRESHOLDS = (
    (COMPUTE, 60.0),
    (COMPUTE, 85.0),
    (MEM_BW, 45.0),
    (MEM_BW, 50.0),
    (MEM_BW, 65.0),
    (L2_MISS, 60.0),
    (TEMPERATURE, 75.0),
    (QUEUE_DEPTH, 40.0),
)
INITIAL_SLOPE = 8.0
HIDDEN = (len(EXPERT_THRESHOLDS), 8)
WEIGHT_GRID = 2.0**-6
SPARSE_BIAS_OFFSET = -4.0
SEED = 20240611
# Training keeps sharpening the boundaries well past 4000 steps: on the grid above, 4000
# steps leave 86 % of the envelope's volume in exact cells, 8000 steps 92 %, 12000 93 %.
STEPS = 12000
BATCH = 256
LEARNING_RATE = 0.01
# The label's logit should beat every other by this much (4x the spec's gate margin of 0.5),
# so the band where the gate falls back to KEEP is thin; the hinge has weight 1, like the
# cross-entropy. Without it 84 % of the volume is in exact cells, with it 93 %.
LABEL_MARGIN = 2.0
# Hinge targets: the forbidden logit must lose by at least this much.
RULE_HINGE = 4.0
SPARSE_HINGE = 6.0
# The penalties apply a little beyond each rule box, so the proof has slack.
HOT_PENALTY_MIN = 80.0
QUEUE_PENALTY_MIN = 52.0


@dataclass(frozen=True)
class Variant:
    """One example controller: its file stem, spec name and training policy."""

    stem: str
    spec_name: str
    description: str
    obeys_heat_rule: bool


VARIANTS = (
    Variant(
        "coadapt",
        "coadapt",
        "Co-adaptation controller for an AI accelerator: picks an execution "
        "strategy from five hardware probes. Trained by certfsm.examples.make_example "
        "from an expert policy that obeys both legality rules.",
        True,
    ),
    Variant(
        "coadapt_unsafe",
        "coadapt-unsafe",
        "Deliberately unsafe co-adaptation controller: trained by "
        "certfsm.examples.make_example from a policy that picks INT4 whenever the "
        "accelerator is bandwidth-bound, ignoring temperature, so the rule "
        "no-int4-when-hot is violated.",
        False,
    ),
)


def expert_labels(x: np.ndarray, obeys_heat_rule: bool) -> np.ndarray:
    """The expert policy, in physical units; the first matching line wins.

    1. compute saturated (>= 85 %) and the queue has room (<= 40): OFFLOAD_CPU;
    2. bandwidth-bound (mem_bw >= 65 %, or >= 50 % with L2 misses >= 60 %)
       and cool (<= 75 degC, unless the heat rule is ignored): INT4;
    3. compute-heavy (>= 60 %) with low bandwidth (<= 45 %): FUSE_CONV;
    4. otherwise KEEP.

    The thresholds leave a 10 degC and 16-request buffer to the legality
    rules (INT4 forbidden from 85 degC, OFFLOAD_CPU from queue depth 56).
    """
    compute, mem_bw, l2_miss, temperature, queue = x.T
    offload = (compute >= 85) & (queue <= 40)
    bandwidth_bound = (mem_bw >= 65) | ((mem_bw >= 50) & (l2_miss >= 60))
    int4 = bandwidth_bound & (temperature <= 75) if obeys_heat_rule else bandwidth_bound
    fuse = (compute >= 60) & (mem_bw <= 45)
    labels = np.full(x.shape[0], KEEP)
    labels[fuse] = FUSE_CONV
    labels[int4] = INT4
    labels[offload] = OFFLOAD_CPU
    return labels


def training_inputs(rng: np.random.Generator) -> np.ndarray:
    """Uniform samples of the envelope plus oversampled rule boxes (and a margin beyond them)."""
    uniform = rng.uniform(LOWER, UPPER, size=(8000, len(INPUTS)))
    hot = rng.uniform(LOWER, UPPER, size=(2500, len(INPUTS)))
    hot[:, TEMPERATURE] = rng.uniform(HOT_PENALTY_MIN - 5.0, UPPER[TEMPERATURE], size=len(hot))
    full = rng.uniform(LOWER, UPPER, size=(2500, len(INPUTS)))
    full[:, QUEUE_DEPTH] = rng.uniform(QUEUE_PENALTY_MIN - 4.0, UPPER[QUEUE_DEPTH], size=len(full))
    return np.concatenate([uniform, hot, full])


def forward(params: list[np.ndarray], z: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Activations of every layer (input first) and the output scores, for normalised inputs z."""
    activations = [z]
    for weight, bias in zip(params[:-2:2], params[1:-2:2]):
        activations.append(np.maximum(activations[-1] @ weight.T + bias, 0.0))
    return activations, activations[-1] @ params[-2].T + params[-1]


def hinge_gradient(scores: np.ndarray, index: int, mask: np.ndarray, target: float) -> tuple[float, np.ndarray]:
    """Loss and gradient of mean over `mask` of max(0, y_index - max_{j != index} y_j + target)."""
    others = scores.copy()
    others[:, index] = -np.inf
    best_other = np.argmax(others, axis=1)
    rows = np.arange(len(scores))
    excess = scores[:, index] - scores[rows, best_other] + target
    active = mask & (excess > 0)
    count = max(int(mask.sum()), 1)
    gradient = np.zeros_like(scores)
    gradient[active, index] += 1.0 / count
    gradient[rows[active], best_other[active]] -= 1.0 / count
    return float(np.sum(excess[active]) / count), gradient


def label_margin_gradient(scores: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    """Loss and gradient of mean of max(0, LABEL_MARGIN - (y_label - max_{j != label} y_j))."""
    rows = np.arange(len(labels))
    others = scores.copy()
    others[rows, labels] = -np.inf
    best_other = np.argmax(others, axis=1)
    excess = LABEL_MARGIN - (scores[rows, labels] - scores[rows, best_other])
    active = excess > 0
    gradient = np.zeros_like(scores)
    gradient[rows[active], labels[active]] -= 1.0 / len(labels)
    gradient[rows[active], best_other[active]] += 1.0 / len(labels)
    return float(np.sum(excess[active]) / len(labels)), gradient


def loss_gradient(
    params: list[np.ndarray], z: np.ndarray, labels: np.ndarray, penalties: list
) -> tuple[float, list[np.ndarray]]:
    """Cross-entropy, label-margin hinge and hinge penalties; returns (loss, gradients matching params)."""
    activations, scores = forward(params, z)
    shifted = scores - scores.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = float(-np.mean(np.log(probabilities[rows, labels] + 1e-300)))
    grad_scores = probabilities
    grad_scores[rows, labels] -= 1.0
    grad_scores /= len(labels)
    margin_loss, margin_grad = label_margin_gradient(scores, labels)
    loss += margin_loss
    grad_scores += margin_grad
    for index, mask, target in penalties:
        hinge_loss, hinge_grad = hinge_gradient(scores, index, mask, target)
        loss += hinge_loss
        grad_scores += hinge_grad
    grads = []
    delta = grad_scores
    for layer in range(len(params) // 2 - 1, -1, -1):
        grads.append(delta.sum(axis=0))
        grads.append(delta.T @ activations[layer])
        if layer > 0:
            delta = (delta @ params[2 * layer]) * (activations[layer] > 0)
    return loss, grads[::-1]


def first_layer_mask() -> np.ndarray:
    """1 where first-layer unit k may read input i (the input of EXPERT_THRESHOLDS[k]), else 0."""
    mask = np.zeros((HIDDEN[0], len(INPUTS)))
    mask[np.arange(HIDDEN[0]), [axis for axis, _ in EXPERT_THRESHOLDS]] = 1.0
    return mask


def initial_params(rng: np.random.Generator) -> list[np.ndarray]:
    """He-normal layers with zero biases, except the first: one ramp per expert threshold.

    The first layer is still drawn from `rng` and then replaced, so the later
    layers and the batch order get the same random numbers as with a dense one.
    """
    sizes = (len(INPUTS), *HIDDEN, len(OUTPUTS))
    params = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        params.append(rng.normal(0.0, np.sqrt(2.0 / n_in), size=(n_out, n_in)))
        params.append(np.zeros(n_out))
    axes = np.array([axis for axis, _ in EXPERT_THRESHOLDS])
    thresholds = np.array([threshold for _, threshold in EXPERT_THRESHOLDS])
    params[0] = INITIAL_SLOPE * first_layer_mask()
    params[1] = -INITIAL_SLOPE * (thresholds - MEAN[axes]) / STD[axes]
    return params


def train(x: np.ndarray, labels: np.ndarray, obeys_heat_rule: bool, rng: np.random.Generator) -> list[np.ndarray]:
    """Mini-batch Adam on normalised inputs; returns weights rounded to the WEIGHT_GRID (2^-6) grid.

    The first layer's gradient is masked with `first_layer_mask`, so Adam never moves
    a weight that starts at zero there: each first-layer unit keeps reading one input.
    """
    z = (x - MEAN) / STD
    masks = [(SPARSE_2_4, np.ones(len(x), dtype=bool), SPARSE_HINGE)]
    masks.append((OFFLOAD_CPU, x[:, QUEUE_DEPTH] >= QUEUE_PENALTY_MIN, RULE_HINGE))
    if obeys_heat_rule:
        masks.append((INT4, x[:, TEMPERATURE] >= HOT_PENALTY_MIN, RULE_HINGE))
    params = initial_params(rng)
    axis_mask = first_layer_mask()
    first, second = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    beta1, beta2 = 0.9, 0.999
    order = np.zeros(0, dtype=np.int64)
    for step in range(1, STEPS + 1):
        if len(order) < BATCH:
            order = np.concatenate([order, rng.permutation(len(x))])
        batch, order = order[:BATCH], order[BATCH:]
        penalties = [(index, mask[batch], target) for index, mask, target in masks]
        _, grads = loss_gradient(params, z[batch], labels[batch], penalties)
        grads[0] = grads[0] * axis_mask
        rate = LEARNING_RATE * (0.05 + 0.95 * (1.0 - step / STEPS))
        for p, g, m, v in zip(params, grads, first, second):
            m *= beta1
            m += (1.0 - beta1) * g
            v *= beta2
            v += (1.0 - beta2) * g * g
            p -= rate * (m / (1.0 - beta1**step)) / (np.sqrt(v / (1.0 - beta2**step)) + 1e-8)
    params[-1][SPARSE_2_4] += SPARSE_BIAS_OFFSET
    return [np.round(p / WEIGHT_GRID) * WEIGHT_GRID for p in params]


def evaluate(params: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    """Scores for physical-unit inputs, float64 (the reference the ONNX graph must match)."""
    return forward(params, (np.asarray(x, dtype=np.float64) - MEAN) / STD)[1]


def build_onnx(params: list[np.ndarray], variant: Variant):
    """The ONNX model: Sub, Div, Gemm, Relu, MatMul+Add, Relu, Gemm (opset 13, IR 8)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def constant(name, array):
        return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)

    w1, b1, w2, b2, w3, b3 = params
    initializers = [
        constant("probe_mean", MEAN),
        constant("probe_std", STD),
        constant("dense1.weight", w1),
        constant("dense1.bias", b1),
        constant("dense2.weight_t", w2.T),
        constant("dense2.bias", b2),
        constant("dense3.weight", w3),
        constant("dense3.bias", b3),
    ]
    nodes = [
        helper.make_node("Sub", ["probes", "probe_mean"], ["centred"], name="normalise_sub"),
        helper.make_node("Div", ["centred", "probe_std"], ["normalised"], name="normalise_div"),
        helper.make_node("Gemm", ["normalised", "dense1.weight", "dense1.bias"], ["dense1"], name="dense1", transB=1),
        helper.make_node("Relu", ["dense1"], ["hidden1"], name="relu1"),
        helper.make_node("MatMul", ["hidden1", "dense2.weight_t"], ["dense2_product"], name="dense2_matmul"),
        helper.make_node("Add", ["dense2_product", "dense2.bias"], ["dense2"], name="dense2_add"),
        helper.make_node("Relu", ["dense2"], ["hidden2"], name="relu2"),
        helper.make_node("Gemm", ["hidden2", "dense3.weight", "dense3.bias"], ["scores"], name="dense3", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        variant.stem,
        [helper.make_tensor_value_info("probes", TensorProto.FLOAT, ["batch", len(INPUTS)])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", len(OUTPUTS)])],
        initializer=initializers,
        doc_string="inputs: " + ", ".join(f"{n} [{u}]" for n, u, *_ in INPUTS) + "; outputs: " + ", ".join(OUTPUTS),
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13)],
        producer_name="certfsm.examples.make_example",
        producer_version="1",
        ir_version=8,
        doc_string=variant.description,
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def build_spec(variant: Variant) -> dict:
    """The controller spec, in the key order of the documented format."""
    inputs = [
        {"name": name, "unit": unit, "min": low, "max": high, "edges": list(edges), "frac_bits": frac_bits}
        for name, unit, low, high, edges, frac_bits in INPUTS
    ]
    return {
        "certfsm_spec": 1,
        "name": variant.spec_name,
        "description": variant.description,
        "model": f"{variant.stem}.onnx",
        "inputs": inputs,
        "outputs": list(OUTPUTS),
        "tokens": {token: code for code, token in enumerate(OUTPUTS)},
        "legal_tokens": list(LEGAL_TOKENS),
        "decision": "argmax",
        "conservative_token": "KEEP",
        "confidence_gate": {"margin": 0.5},
        "legality_rules": [
            {"name": "no-int4-when-hot", "when": {"temperature": {"min": 85}}, "forbid": ["INT4"]},
            {"name": "no-offload-when-queue-full", "when": {"queue_depth": {"min": 56}}, "forbid": ["OFFLOAD_CPU"]},
        ],
        "hysteresis": {"confirm_cycles": 3, "cooldown_cycles": 8},
        "sla": {
            "paths": [
                {
                    "name": "inference",
                    "metric": "latency_ms",
                    "limit": 20.0,
                    "window": 16,
                    "max_violations": 2,
                    "recovery_cycles": 32,
                }
            ]
        },
        "overrides": {"overridable": ["KEEP", "OFFLOAD_CPU"]},
    }


@dataclass(frozen=True)
class TrainingSummary:
    """What the generator measured, for the log line and for the tests."""

    stem: str
    accuracy: float
    hot_int4_loss_margin: float
    full_offload_loss_margin: float
    sparse_loss_margin: float


def forbidden_loss_margin(scores: np.ndarray, index: int) -> float:
    """min over samples of (best other score - score[index]); > 0 means `index` never won."""
    others = np.delete(scores, index, axis=1)
    return float(np.min(others.max(axis=1) - scores[:, index]))


def make_variant(variant: Variant, out_dir: pathlib.Path) -> TrainingSummary:
    """Train one variant and write `<stem>.onnx` and `<stem>.spec.json` into out_dir."""
    rng = np.random.default_rng(SEED)
    x = training_inputs(rng)
    labels = expert_labels(x, variant.obeys_heat_rule)
    params = train(x, labels, variant.obeys_heat_rule, rng)
    model = build_onnx(params, variant)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{variant.stem}.onnx").write_bytes(model.SerializeToString())
    spec_text = json.dumps(build_spec(variant), indent=2) + "\n"
    (out_dir / f"{variant.stem}.spec.json").write_text(spec_text, encoding="utf-8")

    check = np.random.default_rng(SEED + 1).uniform(LOWER, UPPER, size=(100_000, len(INPUTS)))
    hot, full = check.copy(), check.copy()
    hot[:, TEMPERATURE] = np.interp(check[:, TEMPERATURE], [LOWER[3], UPPER[3]], [HOT_MIN, UPPER[3]])
    full[:, QUEUE_DEPTH] = np.interp(check[:, QUEUE_DEPTH], [LOWER[4], UPPER[4]], [QUEUE_FULL_MIN, UPPER[4]])
    accuracy = float(np.mean(np.argmax(evaluate(params, x), axis=1) == labels))
    return TrainingSummary(
        variant.stem,
        accuracy,
        forbidden_loss_margin(evaluate(params, hot), INT4),
        forbidden_loss_margin(evaluate(params, full), OFFLOAD_CPU),
        forbidden_loss_margin(evaluate(params, check), SPARSE_2_4),
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path(__file__).parent, help="output folder")
    arguments = parser.parse_args(argv)
    for variant in VARIANTS:
        summary = make_variant(variant, arguments.out)
        print(
            f"{summary.stem}: training accuracy {summary.accuracy:.4f}; sampled margin by which the "
            f"forbidden logit loses: INT4 when hot {summary.hot_int4_loss_margin:.3f}, OFFLOAD_CPU when "
            f"queue full {summary.full_offload_loss_margin:.3f}, SPARSE_2_4 anywhere {summary.sparse_loss_margin:.3f}"
        )


if __name__ == "__main__":
    main()
