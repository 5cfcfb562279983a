"""The entry points' inputs: each argument checked (a one-line InputError naming it), and seeded random q, k, v."""

import numpy as np

from sim.algorithms import dropout as dropout_
from sim.algorithms.registry import REGISTRY, Algorithm, choose
from sim.algorithms.softmax import SoftmaxState
from sim.core.dtypes import DTYPES, dtype_name
from sim.core.errors import InputError
from sim.core.format import at_most
from sim.machine import hardware as hardware_
from sim.machine import mask

RECORDS = ("counts", "steps", "values")
LOGIT_LIMIT = 1e37  # the largest score |S_ij| the chip's float32 arithmetic is held to (its range ends at 3.4e38)
BLOCK_RULES = ("fit", "paper")


def random_inputs(batch: int, heads: int, n: int, nk: int, d: int, dtype: str, seed: int, *, grad: bool = False):
    """Seeded standard-normal q (batch, heads, n, d) and k, v (batch, heads, nk, d) in the storage dtype; with
    `grad`, also an upstream gradient do shaped like q, drawn after them from the same generator."""
    rng = np.random.default_rng(seed)
    rows = (n, nk, nk, n) if grad else (n, nk, nk)
    return tuple(rng.standard_normal((batch, heads, r, d)).astype(DTYPES[dtype]) for r in rows)


def random_head(n, nk, d, dtype, batch, heads, grad: bool = False):
    """One head of seeded random inputs, after checking the shape arguments of `count` and `count_backward`."""
    check_choice("dtype", dtype, DTYPES)
    for name, value in (("n", n), ("d", d), ("batch", batch), ("heads", heads)):
        check_positive(name, value)
    nk = n if nk is None else check_positive("nk", nk)
    return random_inputs(1, 1, n, nk, d, dtype, 0, grad=grad)


def check_inputs(q, k, v) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate q, k, v and return them in their storage dtype (float64 becomes float32)."""
    arrays = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        x = _array(name, x)
        if x.dtype == np.float64:
            with np.errstate(over="ignore"):  # values beyond float32 become ±inf, refused below
                x = x.astype(np.float32)
        if x.dtype not in DTYPES.values():
            raise InputError(f"{name}: dtype {x.dtype} is not supported; use float16, bfloat16, float32 or float64")
        if x.ndim not in (2, 4):
            raise InputError(
                f"{name}: shape {x.shape} has {x.ndim} dimension{'' if x.ndim == 1 else 's'}; "
                "expected (N, d) or (batch, heads, N, d)"
            )
        arrays.append(x)
    q, k, v = arrays
    if not (q.dtype == k.dtype == v.dtype):
        raise InputError(f"k, v: dtypes {k.dtype}, {v.dtype} differ from q's {q.dtype}; q, k and v share one dtype")
    if q.ndim != k.ndim or q.shape[:-3] != k.shape[:-3]:
        raise InputError(f"k: shape {k.shape} does not match q's {q.shape} in the batch and head dimensions")
    if q.ndim == 4 and (k.shape[1] < 1 or q.shape[1] % k.shape[1]):
        raise InputError(
            f"k: q's {q.shape[1]} query heads are not a multiple of k's {k.shape[1]} K/V heads; GQA needs Hq = g·Hkv"
        )
    if k.shape != v.shape:
        raise InputError(f"v: shape {v.shape} must equal k's {k.shape} (Nk, d)")
    if q.shape[-1] != k.shape[-1]:
        raise InputError(f"k: head dimension {k.shape[-1]} differs from q's {q.shape[-1]}; q, k, v share d")
    if q.shape[-1] < 1:
        raise InputError("d: head dimension must be at least 1, got 0")
    for name, x in (("q", q), ("k", k), ("v", v)):
        if min(x.shape) < 1:
            raise InputError(f"{name}: shape {x.shape} has an empty dimension; N, Nk, batch and heads must be ≥ 1")
        if not np.isfinite(x).all():
            raise InputError(f"{name}: contains NaN or Inf (or values beyond {x.dtype}'s range); inputs must be finite")
    return q, k, v


def check_like_q(q: np.ndarray, **arrays) -> list[np.ndarray]:
    """Validate arrays that share q's shape and storage dtype (the output o, its gradient do)."""
    out = []
    for name, x in arrays.items():
        x = _array(name, x)
        if x.dtype == np.float64 and q.dtype == np.float32:
            x = x.astype(np.float32)
        if x.shape != q.shape:
            raise InputError(f"{name}: shape {x.shape} must equal q's {q.shape}")
        if x.dtype != q.dtype:
            raise InputError(f"{name}: dtype {x.dtype} differs from q's {q.dtype}; q, k, v, o and do share one dtype")
        if not np.isfinite(x).all():
            raise InputError(f"{name}: contains NaN or Inf; it must be finite")
        out.append(x)
    return out


def check_saved(algorithm: str, saves: tuple[str, ...], lse_or_stats, q, k, scale: float, causal: bool) -> dict:
    """What the backward reads from HBM, named as the forward `saves` it ("L"; "ℓ", "m"; or "P").

    Any backward also takes the log-sum-exp L alone: P = exp(S − m)/ℓ with m = L, ℓ = 1 is exp(S − L),
    and a stored P is rebuilt as exp(τ q kᵀ − L) in float64, rounded to the storage dtype.
    """
    *lead, N, _ = q.shape
    Nk = k.shape[-2]
    if isinstance(lse_or_stats, dict) and set(saves) <= set(lse_or_stats):
        given = {name: lse_or_stats[name] for name in saves}
    elif isinstance(lse_or_stats, dict) and "L" in lse_or_stats:
        given = {"L": lse_or_stats["L"]}
    elif isinstance(lse_or_stats, dict):
        raise InputError(
            f"lse_or_stats: the {algorithm} backward needs {' and '.join(saves)} (or the log-sum-exp L); "
            f"got {', '.join(map(str, lse_or_stats)) or 'an empty dict'}"
        )
    elif lse_or_stats is None:  # e.g. the `lse` of a Result whose forward keeps other statistics
        raise InputError(
            f"lse_or_stats: got None; the {algorithm} backward needs {' and '.join(saves)} (a Result's "
            f"result.stats or result.lse, whichever its forward kept) or the log-sum-exp L; or call sim.backward(result, do)"
        )
    else:
        given = {"L": lse_or_stats}
    saved = {}
    for name, x in given.items():
        shape = (*lead, N, Nk) if name == "P" else (*lead, N)
        try:
            x = np.asarray(x, dtype=q.dtype if name == "P" else np.float32)
        except (TypeError, ValueError) as e:
            raise InputError(f"lse_or_stats: {name} is not an array of numbers ({e})") from None
        if x.shape != tuple(shape):
            raise InputError(f"lse_or_stats: {name} has shape {x.shape}; expected {tuple(shape)}")
        if np.isnan(x).any() or np.isposinf(x).any() or (name != "L" and name != "m" and np.isinf(x).any()):
            raise InputError(
                f"lse_or_stats: {name} contains NaN or Inf (only L and m may be −∞, for rows that see no key)"
            )
        saved[name] = x
    if "L" in saved and "ℓ" in saves:
        state = SoftmaxState.from_lse(saved["L"])
        return {"ℓ": state.ℓ, "m": state.m}
    if "L" in saved and "P" in saves:  # as the forward pass left it
        s = scale * (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2))
        if causal:
            s = np.where(mask.visible(0, N, 0, Nk, N, Nk), s, -np.inf)
        L = saved["L"].astype(np.float64)[..., None]
        return {"P": np.exp(s - np.where(np.isneginf(L), np.inf, L)).astype(q.dtype)}
    return saved


def configure(
    algorithm, backward, q, k, scale, causal, block_rows, block_cols, rule, sram_bytes, hardware, *, rows: int = 1,
    softcap: bool = False,
) -> dict:  # fmt: skip
    """A pass's configuration, checked: shapes, scale, mask, dtype, hardware, SRAM and its blocks (`sim.algorithms.registry.choose`,
    for `rows` query rows per position: GQA's packed schedule), as the `Costs` fields so far."""
    *lead, N, d = q.shape
    heads = int(np.prod(lead, dtype=np.int64))
    check_logits(q, k, check_scale(scale, d))
    return configure_shape(
        algorithm, backward, heads, N, k.shape[-2], d, dtype_name(q.dtype), scale, causal, block_rows, block_cols,
        rule, sram_bytes, hardware, rows=rows, softcap=softcap,
    )  # fmt: skip


def configure_shape(
    algorithm, backward, heads, N, Nk, d, dtype, scale, causal, block_rows, block_cols, rule, sram_bytes, hardware,
    *, rows: int = 1, softcap: bool = False,
) -> dict:  # fmt: skip
    """`configure` from the shape alone (no arrays): what a closed-form count needs."""
    scale = check_scale(scale, d)
    check_blocks(rule, block_rows, block_cols)
    hw, M = check_hardware(hardware, sram_bytes)
    s = DTYPES[dtype].itemsize
    Br, Bc = choose(algorithm, rule, rows * N, Nk, d, s, M, block_rows, block_cols, backward=backward, softcap=softcap)
    return dict(
        algorithm=algorithm, block_rows=Br, block_cols=Bc, sram_bytes=M, scale=scale, causal=causal, dtype=dtype,
        hardware=hw, heads=heads, n=N, nk=Nk, d=d,
    )  # fmt: skip


def check_logits(q: np.ndarray, k: np.ndarray, scale: float) -> None:
    """|S_ij| = |τ q_i·k_j| ≤ |τ|·max|q_i|·max|k_j| must stay inside float32, the chip's arithmetic (with room for
    S − m), or the listings would compute ∞ − ∞."""
    norms = [float(np.sqrt((x.astype(np.float64) ** 2).sum(axis=-1)).max()) for x in (q, k)]
    bound = abs(scale) * norms[0] * norms[1]
    if bound > LOGIT_LIMIT:
        most = LOGIT_LIMIT / (norms[0] * norms[1])
        raise InputError(
            f"scale: {scale:g} lets the scores τ q·k reach {bound:.3g}, past {LOGIT_LIMIT:g}: float32, the chip's "
            "arithmetic, ends at 3.4e38 and needs room for S − m; "
            f"choose |scale| ≤ {at_most(most)} for these inputs"
        )


def check_choice(name: str, value, allowed) -> None:
    """`value` must be one of `allowed`."""
    if value not in allowed:
        raise InputError(f"{name}: unknown {value!r}; choose one of {', '.join(allowed)}")


def check_positive(name: str, value) -> int:
    """`value` must be a positive integer."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InputError(f"{name}: must be a positive integer, got {value!r}")
    return int(value)


def check_row(row, N: int) -> None:
    """`row` (None, or a query row to keep values of) must be inside the N query rows."""
    if row is not None and (isinstance(row, bool) or not isinstance(row, (int, np.integer)) or not 0 <= row < N):
        raise InputError(f"row: {row!r} is outside the matrix; query rows are 0 … {N - 1} (N = {N})")


def check_scale(scale, d: int) -> float:
    """The softmax scale τ: 1/√d if None, else a finite number."""
    if scale is None:
        return 1.0 / np.sqrt(d)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)) or not np.isfinite(scale):
        raise InputError(f"scale: must be a finite number, got {scale!r}")
    return float(scale)


def check_dropout(algorithm: Algorithm, dropout_p, seed, *, seed_needed: bool) -> tuple[float, int | None]:
    """dropout_p in [0, 1), above 0 only for an algorithm whose listings drop probabilities, and its seed."""
    dropout_p, seed = dropout_.check(dropout_p, seed, seed_needed=seed_needed)
    if dropout_p > 0 and not algorithm.dropout:
        those = " or ".join(name for name, a in REGISTRY.items() if a.dropout)
        raise InputError(f"dropout_p: {algorithm.title} ({algorithm.name}) has no dropout here; use {those}")
    return dropout_p, seed


def check_hardware(hardware, sram_bytes) -> tuple[hardware_.Hardware, int]:
    """The hardware preset (a name or a Hardware; None: the default) and the SRAM size (None: the preset's)."""
    hw = hardware if isinstance(hardware, hardware_.Hardware) else hardware_.get(hardware or hardware_.DEFAULT)
    return hw, hw.sram_bytes if sram_bytes is None else check_positive("sram_bytes", sram_bytes)


def check_blocks(blocks: str, block_rows, block_cols) -> None:
    """The block rule and the blocks given (None: chosen by the rule)."""
    check_choice("blocks", blocks, BLOCK_RULES)
    for name, value in (("block_rows", block_rows), ("block_cols", block_cols)):
        if value is not None:
            check_positive(name, value)


def _array(name: str, x) -> np.ndarray:
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as e:
        raise InputError(f"{name}: not an array ({e})") from None
