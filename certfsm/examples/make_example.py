"""Generate the embedded co-adaptation example controllers (ONNX + spec JSON).

Run ``python -m certfsm.examples.make_example [--out DIR]``. The script is
deterministic: a fixed seed, mini-batch training in float64 with plain
numpy (softmax cross-entropy and Adam), and weights rounded to multiples
of 2^-6 before they are written as float32. The rounding makes the
output insensitive to last-bit differences between BLAS or libm builds,
so running it again gives byte-identical files; the test suite checks
that against the shipped files.

The network is deliberately small (two hidden layers of 8) and all its
numbers are short binary fractions (weights on the 2^-6 grid, the input
scale a power of two, so folding the normalisation keeps them short):
an auditor re-runs every SMT-LIB proof of the example with stock z3 in
seconds, where exact rational arithmetic on a 2x24 network with full
float32 weights did not finish in minutes.

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
before the first Gemm,
so loaders must fold the normalisation into the first layer.
"""

from __future__ import annotations

import argparse
import json
import pathlib
from dataclasses import dataclass

import numpy as np

# (name, unit, min, max, binning, frac_bits); binning is a bin count or explicit edges.
INPUTS = (
    ("compute_util", "%", 0, 100, 8, 6),
    ("mem_bw_util", "%", 0, 100, 8, 6),
    ("l2_miss_rate", "%", 0, 100, 8, 6),
    ("temperature", "degC", 20, 110, [20, 40, 60, 70, 80, 85, 95, 110], 4),
    ("queue_depth", "requests", 0, 64, [0, 8, 16, 24, 32, 40, 48, 56, 64], 0),
)
OUTPUTS = ("KEEP", "FUSE_CONV", "INT4", "OFFLOAD_CPU", "SPARSE_2_4")
LEGAL_TOKENS = OUTPUTS[:4]
KEEP, FUSE_CONV, INT4, OFFLOAD_CPU, SPARSE_2_4 = range(len(OUTPUTS))
TEMPERATURE, QUEUE_DEPTH = 3, 4
HOT_MIN = 85.0
QUEUE_FULL_MIN = 56.0

LOWER = np.array([spec[2] for spec in INPUTS], dtype=np.float64)
UPPER = np.array([spec[3] for spec in INPUTS], dtype=np.float64)
# Centre of the envelope and a power-of-two scale covering its half-width:
# exact binary numbers, so the normalisation the ONNX graph performs is
# exactly the one trained with, and folding it keeps weights dyadic.
MEAN = (LOWER + UPPER) / 2.0
STD = 2.0 ** np.ceil(np.log2((UPPER - LOWER) / 2.0))

HIDDEN = (8, 8)
WEIGHT_GRID = 2.0**-6
SPARSE_BIAS_OFFSET = -4.0
SEED = 20240611
STEPS = 4000
BATCH = 256
LEARNING_RATE = 0.01
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


def loss_gradient(params: list[np.ndarray], z: np.ndarray, labels: np.ndarray, penalties: list) -> tuple[float, list[np.ndarray]]:
    """Cross-entropy plus hinge penalties; returns (loss, gradients matching params)."""
    activations, scores = forward(params, z)
    shifted = scores - scores.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = float(-np.mean(np.log(probabilities[rows, labels] + 1e-300)))
    grad_scores = probabilities
    grad_scores[rows, labels] -= 1.0
    grad_scores /= len(labels)
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


def initial_params(rng: np.random.Generator) -> list[np.ndarray]:
    sizes = (len(INPUTS), *HIDDEN, len(OUTPUTS))
    params = []
    for n_in, n_out in zip(sizes, sizes[1:]):
        params.append(rng.normal(0.0, np.sqrt(2.0 / n_in), size=(n_out, n_in)))
        params.append(np.zeros(n_out))
    return params


def train(x: np.ndarray, labels: np.ndarray, obeys_heat_rule: bool, rng: np.random.Generator) -> list[np.ndarray]:
    """Mini-batch Adam on normalised inputs; returns weights rounded to the 2^-12 grid."""
    z = (x - MEAN) / STD
    masks = [(SPARSE_2_4, np.ones(len(x), dtype=bool), SPARSE_HINGE)]
    masks.append((OFFLOAD_CPU, x[:, QUEUE_DEPTH] >= QUEUE_PENALTY_MIN, RULE_HINGE))
    if obeys_heat_rule:
        masks.append((INT4, x[:, TEMPERATURE] >= HOT_PENALTY_MIN, RULE_HINGE))
    params = initial_params(rng)
    first, second = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    beta1, beta2 = 0.9, 0.999
    order = np.zeros(0, dtype=np.int64)
    for step in range(1, STEPS + 1):
        if len(order) < BATCH:
            order = np.concatenate([order, rng.permutation(len(x))])
        batch, order = order[:BATCH], order[BATCH:]
        penalties = [(index, mask[batch], target) for index, mask, target in masks]
        _, grads = loss_gradient(params, z[batch], labels[batch], penalties)
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
        [helper.make_tensor_value_info("probes", TensorProto.FLOAT, [1, len(INPUTS)])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, len(OUTPUTS)])],
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
    inputs = []
    for name, unit, low, high, binning, frac_bits in INPUTS:
        entry = {"name": name, "unit": unit, "min": low, "max": high}
        entry.update({"edges": list(binning)} if isinstance(binning, list) else {"bins": binning})
        entry["frac_bits"] = frac_bits
        inputs.append(entry)
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
