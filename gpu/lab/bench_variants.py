"""The forward's variants timed beside what a PyTorch user has for the same computation (issue 25's targets):
GQA (Hq/Hkv = 8) against SDPA with enable_gqa (each backend that takes it; the best counts); a sliding window
(1024 and 4096 keys to the left, causal), ALiBi and softcap against FlexAttention (torch.compile'd once per score or
mask function, block mask built once, then timed), ALiBi also against SDPA given its bias as a float attn_mask; a
packed batch (lengths spread 2×) against SDPA's flash and cuDNN backends and its default (the backend PyTorch
picks) on the same batch padded to its longest sequence. 16k tokens a batch, hidden 2048 (heads = 2048/d), fp16 or
bf16. With --backward, the training step instead: forward and backward through autograd (gpu.autograd.attention:
the backward's rung 7 for every variant) against the same step through SDPA's backends and FlexAttention (its
backward compiled with its forward).

`python -m gpu.lab.bench_variants [--json PATH] [--ns 4096 8192] [--dtype bfloat16] [--backward]`: one line a row,
and the report as JSON."""

import argparse
import contextlib
import shlex
import sys
from functools import partial

import numpy as np

from gpu import device
from gpu.dlpack import as_torch
from gpu.flash import flash_attention
from gpu.lab import results, timing
from gpu.lab.variant_checks import make_inputs

TOKENS, HIDDEN, GROUP = 16384, 2048, 8
MIN_SEQUENCES = 4  # a packed batch's fewest sequences (spread_lengths)
MASK_BACKENDS = ("EFFICIENT_ATTENTION", "CUDNN_ATTENTION", None)  # SDPA's backends that take a float attn_mask
TARGETS = {"gqa": 1.0, "window": 1.0, "varlen": 1.2}  # speed-up over the best PyTorch path the issue asks for


def flops(rows: list[tuple[int, int]], heads: int, d: int, causal: bool, window: int | None = None) -> float:
    """4·d·(query, key) pairs seen, over (N, Nk) sequences: causal halves a square, a window keeps ≈ N·(w + 1)."""
    pairs = 0.0
    for n, nk in rows:
        if window is not None:
            pairs += sum(min(i + 1, window + 1) for i in range(n))
        else:
            pairs += n * nk / (2 if causal else 1)
    return 4.0 * d * heads * pairs


def _torch_flex():
    """FlexAttention compiled, its compile caches emptied: each (N, d) of the sweep makes new score and mask
    functions, and past dynamo's recompile limit (8) flex_attention would run eager (×30–250 slower, run 37), so
    the caches start empty for each (N, d) and hitting the limit raises instead of timing the eager path."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.reset()
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    return torch.compile(flex_attention), create_block_mask


def _timed_row(out, progress, only, key, name, ours, theirs, label, causal, flop, target):
    """Time `ours` beside each of `theirs` (None: that path refused the call) and append the row to `out`."""
    if only and not name.startswith(only):
        return
    ms = timing.interleaved_ms({"flashsim": ours} | {k: f for k, f in theirs.items() if f is not None})
    best = min((k for k in ms if k != "flashsim"), key=ms.get, default=None)
    speedup = ms[best] / ms["flashsim"] if best else None
    line = key | {"variant": name, "causal": causal, "ms": ms, "tflops": {k: flop / t / 1e9 for k, t in ms.items()},
                  "best_torch": best, "baseline": label, "speedup": speedup, "target": target}  # fmt: skip
    progress(f"{name:>14} N={key['n']} d={key['d']} {key['dtype']} {key['pass']} causal={causal}: flashsim "
             f"{ms['flashsim']:.3f} ms, {best} {ms.get(best, float('nan')):.3f} ms, ×{speedup or float('nan'):.2f}")  # fmt: skip
    out.append(line)


def rows_for(n: int, d: int, flex, progress, only: str | None = None, dtype: str = "float16") -> list[dict]:
    """Every variant row at N = n, head dim d (`only`: the rows whose name starts with it)."""
    import torch

    heads, batch = HIDDEN // d, max(1, TOKENS // n)
    out = []
    key = {"n": n, "d": d, "batch": batch, "heads": heads, "dtype": dtype, "pass": "forward"}
    row = partial(_timed_row, out, progress, only, key)

    for causal in (False, True):  # no variant: the plain build, beside SDPA flash (a check that it is unchanged)
        q, k, v, _ = make_inputs(batch, heads, n, n, d, dtype, {})
        tq, tk, tv = (as_torch(x) for x in (q, k, v))
        theirs = {"flash_attention": _sdpa(tq, tk, tv, causal, "FLASH_ATTENTION")}
        row("plain", partial(flash_attention, q, k, v, causal=causal), theirs, "SDPA flash", causal,
            flops([(n, n)] * batch, heads, d, causal), None)  # fmt: skip

    for causal in (False, True):  # GQA: SDPA enable_gqa, each backend that runs it
        q, k, v, kw = make_inputs(batch, heads, n, n, d, dtype, {"kv_heads": heads // GROUP})
        tq, tk, tv = (as_torch(x) for x in (q, k, v))
        theirs = {}
        for backend in ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION"):
            theirs[backend.lower()] = _sdpa(tq, tk, tv, causal, backend)
        flop = flops([(n, n)] * batch, heads, d, causal)
        row("gqa 8", partial(flash_attention, q, k, v, causal=causal), theirs, "SDPA enable_gqa", causal, flop, 1.0)

    flex_attention, create_block_mask = flex
    q, k, v, _ = make_inputs(batch, heads, n, n, d, dtype, {})
    tq, tk, tv = (as_torch(x) for x in (q, k, v))
    for w in (1024, 4096):  # a causal sliding window of w keys to the left
        if w >= n:
            continue
        width = torch.tensor(w, device="cuda")
        mask = create_block_mask(lambda b, h, i, j, width=width: (j <= i) & (i - j <= width), None, None, n, n)
        flex_call = partial(flex_attention, tq, tk, tv, block_mask=mask)
        ours = partial(flash_attention, q, k, v, window=(w, 0))
        row(
            f"window {w}",
            ours,
            {"flex": flex_call},
            "FlexAttention",
            True,
            flops([(n, n)] * batch, heads, d, True, w),
            1.0,
        )
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    tslopes = torch.tensor(slopes, device="cuda", dtype=torch.float32)
    alibi = lambda s, b, h, i, j: s - tslopes[h] * (i - j).abs()  # noqa: E731
    causal_mask = create_block_mask(lambda b, h, i, j: j <= i, None, None, n, n)
    bias = _alibi_bias(tslopes, n, tq.dtype)
    theirs = {f"{(b or 'default').lower()} mask": _sdpa(tq, tk, tv, False, b, bias) for b in MASK_BACKENDS}
    row("alibi", lambda: flash_attention(q, k, v, causal=True, alibi_slopes=slopes),
        {"flex": lambda: flex_attention(tq, tk, tv, score_mod=alibi, block_mask=causal_mask)} | theirs,
        "FlexAttention, SDPA with the bias as attn_mask", True, flops([(n, n)] * batch, heads, d, True),
        None)  # fmt: skip
    cap = 30.0  # a literal in the score function: a captured Python float reaches Inductor as a CPU tensor
    softcap = lambda s, b, h, i, j: 30.0 * torch.tanh(s / 30.0)  # noqa: E731
    row("softcap", lambda: flash_attention(q, k, v, softcap=cap),
        {"flex": lambda: flex_attention(tq, tk, tv, score_mod=softcap)}, "FlexAttention", False,
        flops([(n, n)] * batch, heads, d, False), None)  # fmt: skip

    lengths = spread_lengths(n)
    packed_row = partial(_timed_row, out, progress, only, key | {"batch": len(lengths), "lengths": lengths})
    for causal in (False, True):
        q, k, v, kw = make_inputs(0, heads, 0, 0, d, dtype, {"seqlens_q": lengths, "seqlens_k": lengths})
        pq, pk, pv = (as_torch(x) for x in make_inputs(len(lengths), heads, n, n, d, dtype, {})[:3])
        ours = partial(flash_attention, q, k, v, causal=causal, **kw)
        theirs = {b.lower(): _sdpa(pq, pk, pv, causal, b) for b in ("FLASH_ATTENTION", "CUDNN_ATTENTION")}
        theirs["default"] = _sdpa(pq, pk, pv, causal, None)
        packed_row("varlen 2x", ours, theirs, "SDPA on the padded batch", causal,
                   flops([(x, x) for x in lengths], heads, d, causal), 1.2)  # fmt: skip
    return out


def spread_lengths(n: int) -> list[int]:
    """A packed batch's lengths: n down to n/2 evenly spaced (a 2× spread, mean 0.75 n, so padding to n costs 4/3),
    about TOKENS in all and at least MIN_SEQUENCES. Spaced, not drawn: run 45's three draws at N = 16384 were
    14.3K–16.2K, a 1.13× spread with 1.10× padding, not the distribution the target names."""
    count = max(MIN_SEQUENCES, round(TOKENS / (0.75 * n)))
    return [round(n - i * (n / 2) / (count - 1)) for i in range(count)]


def backward_rows(n: int, d: int, flex, progress, only: str | None = None, dtype: str = "float16") -> list[dict]:
    """The training step (the forward, then torch.autograd.grad of o against a fixed dO: nothing accumulates into
    .grad) for each variant the backward takes, at N = n, head dim d, causal."""
    import torch

    from gpu.autograd import attention

    heads, batch = HIDDEN // d, max(1, TOKENS // n)
    out = []
    key = {"n": n, "d": d, "batch": batch, "heads": heads, "dtype": dtype, "pass": "forward+backward"}
    row = partial(_timed_row, out, progress, only, key)
    flex_attention, create_block_mask = flex

    def leaves(*xs):
        return [as_torch(x).requires_grad_() for x in xs]

    def step(fn, ins, do):
        return lambda: torch.autograd.grad(fn(*ins), ins, do)

    def sdpa_step(ins, do, backend, mask=None):
        def fn(q, k, v):
            with _backend(backend):
                gqa = k.shape[1] != q.shape[1]
                return torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=gqa
                )

        try:
            step(fn, ins, do)()
            torch.cuda.synchronize()
        except RuntimeError:
            return None
        return step(fn, ins, do)

    flop = 3.5 * flops([(n, n)] * batch, heads, d, True)  # the backward's matmuls are 2.5 × the forward's
    backends = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION")
    q, k, v, _ = make_inputs(batch, heads, n, n, d, dtype, {"kv_heads": heads // GROUP})
    ins, do = leaves(q, k, v), torch.randn_like(as_torch(q))
    theirs = {b.lower(): sdpa_step(ins, do, b) for b in backends}
    row("gqa 8", step(partial(attention, causal=True), ins, do), theirs, "SDPA enable_gqa", True, flop, 1.0)

    q, k, v, _ = make_inputs(batch, heads, n, n, d, dtype, {})
    ins, do = leaves(q, k, v), torch.randn_like(as_torch(q))
    for w in (1024, 4096):
        if w >= n:
            continue
        width = torch.tensor(w, device="cuda")
        mask = create_block_mask(lambda b, h, i, j, width=width: (j <= i) & (i - j <= width), None, None, n, n)
        row(f"window {w}", step(partial(attention, window=(w, 0)), ins, do),
            {"flex": step(partial(flex_attention, block_mask=mask), ins, do)}, "FlexAttention", True,
            3.5 * flops([(n, n)] * batch, heads, d, True, w), 1.0)  # fmt: skip
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    tslopes = torch.tensor(slopes, device="cuda", dtype=torch.float32)
    alibi = lambda s, b, h, i, j: s - tslopes[h] * (i - j).abs()  # noqa: E731
    causal_mask = create_block_mask(lambda b, h, i, j: j <= i, None, None, n, n)
    bias = _alibi_bias(tslopes, n, ins[0].dtype)
    theirs = {f"{(b or 'default').lower()} mask": sdpa_step(ins, do, b, bias) for b in MASK_BACKENDS}
    row("alibi", step(partial(attention, causal=True, alibi_slopes=slopes), ins, do),
        {"flex": step(partial(flex_attention, score_mod=alibi, block_mask=causal_mask), ins, do)} | theirs,
        "FlexAttention, SDPA with the bias as attn_mask", True, flop, None)  # fmt: skip
    softcap = lambda s, b, h, i, j: 30.0 * torch.tanh(s / 30.0)  # noqa: E731
    row("softcap", step(partial(attention, causal=True, softcap=30.0), ins, do),
        {"flex": step(partial(flex_attention, score_mod=softcap, block_mask=causal_mask), ins, do)}, "FlexAttention",
        True, flop, None)  # fmt: skip

    lengths = spread_lengths(n)
    q, k, v, kw = make_inputs(0, heads, 0, 0, d, dtype, {"seqlens_q": lengths, "seqlens_k": lengths})
    ins, do = leaves(q, k, v), torch.randn_like(as_torch(q))
    padded = leaves(*make_inputs(len(lengths), heads, n, n, d, dtype, {})[:3])
    pdo = torch.randn_like(padded[0])
    theirs = {b.lower(): sdpa_step(padded, pdo, b) for b in backends[:2]} | {"default": sdpa_step(padded, pdo, None)}
    packed_row = partial(_timed_row, out, progress, only, key | {"batch": len(lengths), "lengths": lengths})
    packed_row("varlen 2x", step(partial(attention, causal=True, **kw), ins, do), theirs, "SDPA on the padded batch",
               True, 3.5 * flops([(x, x) for x in lengths], heads, d, True), 1.2)  # fmt: skip
    return out


def _backend(backend: str | None):
    """SDPA's backend forced by name (FLASH_ATTENTION, …), or None: the one PyTorch picks."""
    if backend is None:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel(getattr(SDPBackend, backend))


def _alibi_bias(tslopes, n: int, dtype):
    """ALiBi as a PyTorch user without FlexAttention writes it: the (1, H, n, n) float attn_mask −slope_h·|i − j|,
    −inf above the diagonal (causal), built once and not timed. It holds N×N per head: a baseline, not our path."""
    import torch

    i = torch.arange(n, device="cuda")
    bias = -(tslopes[:, None, None] * (i[:, None] - i[None, :]).abs())
    return bias.masked_fill(i[None, :] > i[:, None], float("-inf")).to(dtype)[None]


def _sdpa(q, k, v, causal: bool, backend: str | None, mask=None):
    """SDPA with one backend (None: the one PyTorch picks) on torch tensors (enable_gqa where k has fewer heads; a
    float `mask` as attn_mask), or None where it refuses."""
    import torch

    gqa = k.shape[1] != q.shape[1]

    def call():
        with _backend(backend):
            return torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=gqa
            )

    try:
        call()
        torch.cuda.synchronize()
    except RuntimeError:
        return None
    return call


def run_bench(
    ns=(4096,), ds=(64, 128), *, only=None, progress=None, command=None, dtype="float16", backward=False
) -> dict:
    """Every row (or those whose name starts with `only`) at each N in `ns` and head dim in `ds`, forward (or with
    `backward`, the training step): the report (kind "bench-variants")."""
    device.require()
    rows_of = backward_rows if backward else rows_for
    rows = [
        r for n in ns for d in ds for r in rows_of(n, d, _torch_flex(), progress or (lambda line: None), only, dtype)
    ]
    return {"kind": "bench-variants", "env": results.environment(command), "device": device.properties(),
            "rows": rows, "targets": TARGETS}  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.bench_variants")
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--ns", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--ds", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--only", help="the rows whose variant name starts with this (plain, gqa, window, …)")
    parser.add_argument("--dtype", choices=("float16", "bfloat16"), default="float16")
    parser.add_argument("--backward", action="store_true", help="time forward + backward through autograd")
    a = parser.parse_args(argv)
    command = "python -m gpu.lab.bench_variants " + shlex.join(sys.argv[1:] if argv is None else argv)
    report = run_bench(a.ns, a.ds, only=a.only, progress=lambda line: print(line, flush=True), command=command,
                       dtype=a.dtype, backward=a.backward)  # fmt: skip
    if a.json:
        results.write(report, a.json)


if __name__ == "__main__":
    main()
