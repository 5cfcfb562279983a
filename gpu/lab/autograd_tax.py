"""`python -m gpu.lab.autograd_tax`: what `gpu.autograd.attention` costs over the direct CuPy calls (issue 23).

For FlashAttention-2's benchmark shapes (16k tokens, hidden 2048, fp16) it prints, per N and d:
  queued    ms per forward + backward, direct calls and through autograd, timed as a training loop runs them
            (back-to-back calls, the host's work hidden behind the GPU's queue; gpu.lab.timing.interleaved_ms), and
            the tax between the two;
  host      µs of host time per call of each (20 calls issued without waiting, the GPU's queue far from full),
            which a single call on an idle GPU pays as latency; and autograd's with Python's garbage collector off
            ("gc off") and with PyTorch's autograd engine on the calling thread ("1 thread":
            torch.autograd.set_multithreading_enabled(False); by default a CUDA backward runs on the engine's own
            thread, and run 40-tax2 found that hand-over behind the ~450 µs a step run 39 could not place);
and whether PyTorch synchronized the host inside the autograd path (torch.cuda.set_sync_debug_mode("error")).
"""

import argparse
import gc
import time

from gpu import device
from gpu.backward import flash_attention_backward
from gpu.dlpack import as_torch
from gpu.flash import flash_attention
from gpu.lab import timing
from gpu.lab.checks import random_like, random_qkv
from gpu.lab.harness import HIDDEN, TOKENS

HOST_CALLS = 20


def calls(n: int, d: int, causal: bool, dtype: str = "float16", arrays: bool = False):
    """(direct, autograd): zero-argument callables running forward + backward on the same inputs (and, with
    `arrays`, those inputs: (q, k, v, do))."""
    import torch

    from gpu.autograd import attention

    q, k, v = random_qkv(TOKENS // n, HIDDEN // d, n, n, d, dtype, seed=n + d)
    do = random_like(q, seed=1)

    def direct():
        o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
        return flash_attention_backward(q, k, v, o, lse, do, causal=causal)

    tq, tk, tv = (as_torch(x).requires_grad_() for x in (q, k, v))
    tdo = as_torch(do)
    through = lambda: torch.autograd.grad(attention(tq, tk, tv, causal=causal), (tq, tk, tv), tdo)  # noqa: E731
    return (direct, through, (q, k, v, do)) if arrays else (direct, through)


def host_us(fn, collector: bool = True, threads: bool = True) -> float:
    """Host µs per call of fn, HOST_CALLS calls issued back to back, the GPU left to catch up afterwards; with
    `collector` False, Python's garbage collector off while they are issued; with `threads` False, PyTorch's
    autograd engine running backward passes on this thread."""
    import torch

    cupy = device.require()
    cupy.cuda.Device().synchronize()
    was = gc.isenabled()
    if not collector:
        gc.disable()
    try:
        with torch.autograd.set_multithreading_enabled(threads):
            start = time.perf_counter()
            for _ in range(HOST_CALLS):
                fn()
            spent = time.perf_counter() - start
    finally:
        if was:
            gc.enable()
    cupy.cuda.Device().synchronize()
    return 1e6 * spent / HOST_CALLS


def synchronizes(fn) -> str:
    """ "no" if fn() ran with PyTorch's sync debug mode set to "error", else the error's first line."""
    import torch

    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
        return "no"
    except RuntimeError as e:
        return str(e).splitlines()[0][:120]
    finally:
        torch.cuda.set_sync_debug_mode("default")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.autograd_tax", description=__doc__.splitlines()[0])
    parser.add_argument("--ns", default="1024,4096,16384")
    parser.add_argument("--causal", action="store_true")
    args = parser.parse_args(argv)
    print(f"device: {device.properties()['name']}, fp16, causal={args.causal}")
    print(
        f"{'d':>4} {'N':>6} {'direct ms':>10} {'autograd ms':>12} {'tax':>7} {'host µs direct':>15} {'autograd':>9}"
        f" {'gc off':>7} {'1 thread':>9}  sync"
    )
    for d in (64, 128):
        for n in map(int, args.ns.split(",")):
            direct, through = calls(n, d, args.causal)
            ms = timing.interleaved_ms({"direct": direct, "autograd": through}, rounds=9)
            tax = ms["autograd"] / ms["direct"] - 1
            hd, ha = host_us(direct), host_us(through)
            hg, h1 = host_us(through, collector=False), host_us(through, threads=False)
            print(
                f"{d:>4} {n:>6} {ms['direct']:10.3f} {ms['autograd']:12.3f} {100 * tax:+6.1f}% {hd:15.0f} {ha:9.0f}"
                f" {hg:7.0f} {h1:9.0f}  {synchronizes(through)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
