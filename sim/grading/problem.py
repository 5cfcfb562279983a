"""A test made concrete: a case drawn from the test's ranges with a seed, its inputs, and what the answer must be.

Every grading run draws fresh shapes (a run seed, given or random, and the test's name seed each
test), so a failure is reproduced by grading again with the seed the report prints. All the
submissions of one run get the same cases.
"""

import zlib
from dataclasses import dataclass, field

import numpy as np

from sim.api import reference, reference_variants
from sim.api.tolerance import gradient_bound, lse_bound, output_bound
from sim.core.dtypes import DTYPES
from sim.core.errors import InputError
from sim.core.format import human_bytes, percent
from sim.grading import bound, traffic
from sim.grading.triton import launch

MEMORY_SLACK = 256 << 10  # the memory test's allowance beyond 4 × SRAM: the harness's own buffers, NumPy temporaries
# The resident check (checks.evaluate, sim.grading.resident) allows half of one N × Nk float32 matrix; honest runs of
# the masters grew by 0.55–0.96 MiB (pipe buffers, allocator arenas: 02, 03 at N 1024, 04 at N 768), so a memory
# test's half-matrix must be at least RESIDENT_FLOOR for an honest submission to pass with room to spare.
RESIDENT_FLOOR = 2 << 20
SHAPE_KEYS = ("N", "Nk", "d", "Br", "Bc", "rows", "length")


@dataclass
class Problem:
    """One test of one run: the drawn case, the inputs, the reference answer, the limits it is checked against."""

    test: dict
    case: dict
    inputs: dict[str, np.ndarray]  # placed in the grader's HBM (chip) or sent to the submission (the others)
    reference: dict[str, np.ndarray]
    bounds: dict[str, object] = field(default_factory=dict)  # per output: an elementwise bound or a scalar
    expected: traffic.Expected | None = None
    sram_bytes: int = 0
    memory_bound: int | None = None
    kwargs: dict = field(default_factory=dict)
    fewest: bound.Bound | None = None  # the fewest HBM bytes any tiling flashsim knows moves in this SRAM

    @property
    def name(self) -> str:
        return self.test["name"]

    def describe(self) -> str:
        """The case in one line: shape, dtype, mask, blocks, SRAM."""
        c = self.case
        if c.get("rows") is not None:
            return f"{c['rows']} rows × {c['length']} logits, scale {c['logit_scale']:g}, {percent(c['masked'])} masked"
        parts = [f"N={c['N']}", f"Nk={c['Nk']}", f"d={c['d']}", c["dtype"]] + (["causal"] if c["causal"] else [])
        parts += [f"window=({c['window'][0]}, {c['window'][1]})"] if c.get("window") else []
        parts += [f"Br={c['Br']}", f"Bc={c['Bc']}"] + ([f"SRAM {self.sram_bytes:,} B"] if self.sram_bytes else [])
        return ", ".join(parts)


def seed_of(run_seed: int, name: str) -> int:
    """The seed of one test in one run."""
    return int(np.random.SeedSequence([run_seed, zlib.crc32(name.encode())]).generate_state(1)[0])


def draw(test: dict, seed: int) -> dict:
    """The test's ranges ([lo, hi] inclusive, a list of choices for dtype) drawn with `seed`."""
    rng = np.random.default_rng(seed)
    case = {"seed": seed}
    for key in SHAPE_KEYS:
        value = test.get(key)
        if isinstance(value, list):
            value = int(rng.integers(value[0], value[1] + 1))
        case[key] = value
    if case["Nk"] == "N":
        case["Nk"] = case["N"]
    dtype = test.get("dtype", "fp32")
    case["dtype"] = dtype[int(rng.integers(len(dtype)))] if isinstance(dtype, list) else dtype
    case["causal"] = bool(test.get("causal", False))
    case["logit_scale"] = float(test.get("logit_scale", 1.0))
    case["masked"] = float(test.get("masked", 0.0))
    if case["d"] is not None:
        case["scale"] = 1.0 / np.sqrt(case["d"])
    window = test.get("window")  # (left, right): each side a number (−1 unbounded) or a range [lo, hi]
    if window is not None:
        window = [int(rng.integers(w[0], w[1] + 1)) if isinstance(w, list) else w for w in window]
    case["window"] = window
    return case


def make(grading: dict, test: dict, run_seed: int) -> Problem:
    """Draw the case of `test` for this run and work out its inputs and answer."""
    case = draw(test, seed_of(run_seed, test["name"]))
    rng = np.random.default_rng(case["seed"])
    if grading["driver"] == "softmax":
        return _softmax(test, case, rng)
    return _attention(grading, test, case, rng)


def _attention(grading: dict, test: dict, case: dict, rng) -> Problem:
    N, Nk, d, dt = case["N"], case["Nk"], case["d"], DTYPES[case["dtype"]]
    q, k = ((rng.standard_normal((n, d)) * case["logit_scale"]).astype(dt) for n in (N, Nk))
    v = rng.standard_normal((Nk, d)).astype(dt)
    o, lse = reference.attention(q, k, v, causal=case["causal"], scale=case["scale"])
    kwargs = {"Br": case["Br"], "Bc": case["Bc"], "scale": case["scale"]}
    if grading.get("causal_argument", False):
        kwargs["causal"] = case["causal"]
    if grading.get("window_argument", False):  # the sliding window: the float64 definition with its explicit mask
        kwargs["window"] = case["window"]
        o, lse = reference_variants.attention(
            q, k, v, causal=case["causal"], window=case["window"], scale=case["scale"]
        )
    if grading["driver"] == "gpu":
        return Problem(test, case, {"Q": q, "K": k, "V": v}, {"O": o, "L": lse},
                       {"O": output_bound("flash2", case["dtype"], o, v, Nk, case["Bc"], **_scores(grading, case, q, k)),
                        "L": lse_bound(lse)}, kwargs=kwargs)  # fmt: skip
    expected = traffic.expected(grading, case)
    peak = traffic.expected(grading, launch.padded(case)).sram_peak if grading["driver"] == "triton" else None
    sram = int(test["sram"]) if "sram" in test else int((peak or expected.sram_peak) * test.get("sram_slack", 1.0))
    if grading.get("pass") == "backward":
        do = rng.standard_normal((N, d)).astype(dt)
        inputs = {"Q": q, "K": k, "V": v, "O": o.astype(dt), "dO": do, "L": lse.astype(np.float32)}
        dq, dk, dv = reference.attention_backward(q, k, v, do, causal=case["causal"], scale=case["scale"])
        answer = {"dQ": dq, "dK": dk, "dV": dv}
        bounds = {name: gradient_bound(g) for name, g in answer.items()}
    else:
        inputs, answer = {"Q": q, "K": k, "V": v}, {"O": o}
        bounds = {
            "O": output_bound(grading["algorithm"], case["dtype"], o, v, Nk, case["Bc"], **_scores(grading, case, q, k))
        }
        stat = "L" if grading["algorithm"] == "flash2" else "ℓ"
        answer[stat], bounds[stat] = lse, lse_bound(lse)
    problem = Problem(test, case, inputs, answer, bounds, expected, sram, kwargs=kwargs)
    problem.fewest = bound.fewest(case, sram, grading.get("pass") == "backward")
    if test["check"] == "memory":
        problem.memory_bound = 4 * sram + MEMORY_SLACK
        whole = 4 * N * Nk
        if whole < 4 * problem.memory_bound:
            raise InputError(
                f"test {test['name']!r}: at N={N}, Nk={Nk} an N × Nk float32 matrix ({human_bytes(whole)}) is not far "
                f"above the memory bound ({human_bytes(problem.memory_bound)}); use a larger shape or smaller blocks"
            )
        if whole // 2 < RESIDENT_FLOOR:
            raise InputError(
                f"test {test['name']!r}: at N={N}, Nk={Nk} half an N × Nk float32 matrix ({human_bytes(whole // 2)}), "
                f"what the resident check allows, is below {human_bytes(RESIDENT_FLOOR)}; use a larger shape"
            )
    return problem


def _scores(grading: dict, case: dict, q: np.ndarray, k: np.ndarray) -> dict:
    """What `output_bound` needs for the scores' rounding (`sim.api.tolerance.score_error`): q, k, τ and P, masked as
    the reference is."""
    window = case["window"] if grading.get("window_argument", False) else None
    p = reference_variants.probabilities(q, k, causal=case["causal"], window=window, scale=case["scale"])
    return {"q": q, "k": k, "p": p, "scale": case["scale"]}


def _softmax(test: dict, case: dict, rng) -> Problem:
    rows, length = case["rows"], case["length"]
    X = rng.standard_normal((rows, length)) * case["logit_scale"]
    X[rng.random((rows, length)) < case["masked"]] = -np.inf
    if test.get("empty_row") and rows > 1:
        X[0] = -np.inf
    m, ℓ = softmax_state(X)
    if test["check"] == "update":
        return Problem(test, case, {"X": X}, {"m": m, "ℓ": ℓ})
    split = rng.integers(0, length + 1, size=rows)
    left = np.where(np.arange(length) < split[:, None], X, -np.inf)
    right = np.where(np.arange(length) >= split[:, None], X, -np.inf)
    (m1, ℓ1), (m2, ℓ2) = softmax_state(left), softmax_state(right)
    return Problem(test, case, {"m₁": m1, "ℓ₁": ℓ1, "m₂": m2, "ℓ₂": ℓ2}, {"m": m, "ℓ": ℓ})


def softmax_state(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float64 (m, ℓ) of each row: m = max, ℓ = Σ exp(x − m); (−∞, 0) for a row of −∞ only."""
    m = X.max(axis=1)
    finite = np.isfinite(m)
    ℓ = np.zeros(len(m))
    ℓ[finite] = np.exp(X[finite] - m[finite, None]).sum(axis=1)
    return m, ℓ
