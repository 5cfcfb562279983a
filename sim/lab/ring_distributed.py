"""Ring attention for real, on torch.distributed: the simulator's ring (`sim.algorithms.ring`) with real exchanges.

Every process holds one shard (`sim.machine.sharding`). At ring step t it posts the point-to-point exchange of
the K/V shard in hand (`batch_isend_irecv`: send to rank + 1, receive from rank − 1), attends to that shard while
the bytes move, merges the partial output with ⊕ (`merge`, by `sim.algorithms.softmax`), and only then waits for the next shard.
Backward: the float32 dK, dV travel with K/V, their exchange overlapping the next step's attention.
The attention of a block runs on "numpy", the simulator's FlashAttention-2 listing (gloo, CPU processes), or
"gpu", the project's CuPy kernels (NCCL, one GPU per process). torch is the optional extra `distributed`.

    torchrun --nproc-per-node 4 -m sim.lab.ring_distributed --seqlen 256 --headdim 32 --causal --sharding zigzag

Rank 0 gathers the shards, holds them to the float64 reference within `sim.api.tolerance`'s ring bound, prints one
line per check and each step's attention and exchange-wait seconds, and exits 1 if a check fails.
"""

import json
import os
import time

import click
import numpy as np

from sim.algorithms.softmax import SoftmaxState
from sim.machine.sharding import SHARDINGS, pieces, shards


class NumpyBlocks:
    """Attention of a block through the simulator's FlashAttention-2 listing, on NumPy copies of CPU tensors."""

    def forward(self, q, k, v, causal: bool, scale: float):
        import torch

        import sim

        r = sim.run("flash2", q.numpy(), k.numpy(), v.numpy(), causal=causal, scale=scale)
        return torch.from_numpy(r.output), torch.from_numpy(r.lse)

    def backward(self, q, k, v, o, lse, do, causal: bool, scale: float):
        import torch

        import sim

        g = sim.backward("flash2", *(x.numpy() for x in (q, k, v, o, lse, do)), causal=causal, scale=scale)
        return tuple(torch.from_numpy(x) for x in (g.dq, g.dk, g.dv))


class GPUBlocks:
    """Attention of a block through the project's CuPy kernels (gpu.flash, gpu.backward) on CUDA tensors."""

    def forward(self, q, k, v, causal: bool, scale: float):
        from gpu.dlpack import as_cupy, as_torch
        from gpu.flash import flash_attention

        o, lse = flash_attention(*(as_cupy(x[None, None]) for x in (q, k, v)), causal=causal, scale=scale,
                                 return_lse=True)  # fmt: skip
        return as_torch(o)[0, 0], as_torch(lse)[0, 0]

    def backward(self, q, k, v, o, lse, do, causal: bool, scale: float):
        from gpu.backward import flash_attention_backward
        from gpu.dlpack import as_cupy, as_torch

        grads = flash_attention_backward(*(as_cupy(x[None, None].contiguous()) for x in (q, k, v, o, lse, do)),
                                         causal=causal, scale=scale)  # fmt: skip
        return tuple(as_torch(g)[0, 0] for g in grads)


def merge(o_run, lse_run, o_t, lse_t):
    """(o_run, lse_run) ⊕ (o_t, lse_t) as `sim.algorithms.ring` merges: the statistics by `sim.algorithms.softmax` (n floats,
    on the host), then o = (α·o_run + β·o_t) / ℓ in float32 on the tensors' device."""
    import torch

    new, α, β = SoftmaxState.from_lse(lse_run.cpu().numpy()).rescale(SoftmaxState.from_lse(lse_t.cpu().numpy()))
    α, β, ℓ = (torch.from_numpy(x.astype(np.float32)).to(o_run.device)[:, None] for x in (α, β, new.ℓ))
    o = (α * o_run + β * o_t.float()) / torch.where(ℓ > 0, ℓ, torch.ones_like(ℓ))  # 0 for a row that sees no key
    return o, torch.from_numpy(new.lse.astype(np.float32)).to(o_run.device)


def _exchange(sends, recvs, rank: int, P: int):
    """Post sends of `sends` to rank + 1 and receives into `recvs` from rank − 1; returns the requests."""
    import torch.distributed as dist

    ops = [dist.P2POp(dist.isend, x, (rank + 1) % P) for x in sends]
    ops += [dist.P2POp(dist.irecv, x, (rank - 1) % P) for x in recvs]
    return dist.batch_isend_irecv(ops)


def _pass_kv(k_in, v_in, held, rank: int, t: int, P: int):
    """Step t's K, V hop: send (k_in, v_in) on, receive the next holder's into new tensors; none at the last step."""
    import torch

    if t == P - 1:
        return None, None, []
    rows = _rows(held[(rank - t - 1) % P])
    k_next, v_next = (torch.empty((rows, k_in.shape[1]), dtype=k_in.dtype, device=k_in.device) for _ in range(2))
    return k_next, v_next, _exchange([k_in, v_in], [k_next, v_next], rank, P)


def forward(q, k, v, held, blocks, *, causal: bool, scale: float, steps: list):
    """This rank's O (storage dtype) and L (float32); `steps` gets (attention s, wait s) per ring step."""
    import torch
    import torch.distributed as dist

    rank, P = dist.get_rank(), dist.get_world_size()
    n, d = q.shape
    o_run, lse_run = (
        torch.zeros((n, d), dtype=torch.float32, device=q.device),
        torch.full((n,), -np.inf, device=q.device),
    )
    k_in, v_in = k, v
    for t in range(P):
        s = (rank - t) % P
        k_next, v_next, reqs = _pass_kv(k_in, v_in, held, rank, t, P)
        t0 = time.perf_counter()
        for piece in pieces(held[rank], held[s], causal):
            (q0, q1), (k0, k1) = piece.q, piece.kv
            o_t, lse_t = blocks.forward(q[q0:q1], k_in[k0:k1], v_in[k0:k1], piece.causal, scale)
            o_run[q0:q1], lse_run[q0:q1] = merge(o_run[q0:q1], lse_run[q0:q1], o_t, lse_t)
        _sync(q)
        t1 = time.perf_counter()
        for req in reqs:
            req.wait()
        steps.append((t1 - t0, time.perf_counter() - t1))
        if reqs:
            k_in, v_in = k_next, v_next
    return o_run.to(q.dtype), lse_run


def backward(q, k, v, o, lse, do, held, blocks, *, causal: bool, scale: float, steps: list):
    """This rank's dQ, dK, dV (storage dtype): dK, dV ride the ring in float32 and are home after P hops."""
    import torch
    import torch.distributed as dist

    rank, P = dist.get_rank(), dist.get_world_size()
    d = q.shape[1]
    f32 = dict(dtype=torch.float32, device=q.device)
    dq, dk_in, dv_in = torch.zeros(q.shape, **f32), torch.zeros(k.shape, **f32), torch.zeros(k.shape, **f32)
    k_in, v_in, pending, arriving = k, v, [], None
    for t in range(P):
        s = (rank - t) % P
        k_next, v_next, reqs = _pass_kv(k_in, v_in, held, rank, t, P)
        t0 = time.perf_counter()
        parts = []
        for piece in pieces(held[rank], held[s], causal):
            (q0, q1), (k0, k1) = piece.q, piece.kv
            args = (q[q0:q1], k_in[k0:k1], v_in[k0:k1], o[q0:q1], lse[q0:q1], do[q0:q1])
            parts.append((piece, blocks.backward(*args, piece.causal, scale)))
        _sync(q)
        t1 = time.perf_counter()
        for req in pending:  # step t − 1's dK, dV arrive, sent while this step attended
            req.wait()
        if pending:
            dk_in, dv_in = arriving
        for piece, (dq_t, dk_t, dv_t) in parts:
            (q0, q1), (k0, k1) = piece.q, piece.kv
            dq[q0:q1] += dq_t
            dk_in[k0:k1] += dk_t
            dv_in[k0:k1] += dv_t
        pending = []
        if P > 1:
            arriving = tuple(torch.empty((_rows(held[(rank - t - 1) % P]), d), **f32) for _ in range(2))
            pending = _exchange([dk_in, dv_in], list(arriving), rank, P)
        for req in reqs:
            req.wait()
        steps.append((t1 - t0, time.perf_counter() - t1))
        if reqs:
            k_in, v_in = k_next, v_next
    for req in pending:  # the last hop brings this rank's own dK, dV home
        req.wait()
    if pending:
        dk_in, dv_in = arriving
    return dq.to(q.dtype), dk_in.to(q.dtype), dv_in.to(q.dtype)


def _rows(chunks) -> int:
    return sum(r1 - r0 for r0, r1 in chunks)


def _sync(x) -> None:
    """Wait for the GPU's queued attention, so that the step's time is the attention's."""
    if x.is_cuda:
        import torch

        torch.cuda.synchronize()


@click.command()
@click.option("--seqlen", "n", type=click.IntRange(1), default=64, show_default=True, help="Sequence length N.")
@click.option("--headdim", "d", type=click.IntRange(1), default=16, show_default=True, help="Head dimension d.")
@click.option("--dtype", type=click.Choice(["fp32", "fp16"]), default="fp32", show_default=True)
@click.option("--causal", is_flag=True, help="Causal mask.")
@click.option("--sharding", type=click.Choice(SHARDINGS), default="contiguous", show_default=True)
@click.option("--backend", type=click.Choice(["gloo", "nccl"]), default="gloo", show_default=True,
              help="gloo: CPU processes, the simulator's blocks; nccl: one GPU each, the CuPy kernels.")  # fmt: skip
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Rank 0 writes the checks as JSON here.")
def main(n, d, dtype, causal, sharding, backend, seed, out) -> None:
    """Run one ring attention forward and backward across the torchrun processes; rank 0 checks and reports."""
    from sim.api.inputs import random_inputs
    from sim.core.errors import FlashsimError

    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        _refuse("torch is not installed; it is the optional extra: pip install 'flashsim[distributed]'")
    missing = [name for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if name not in os.environ]
    if missing:
        _refuse(f"{', '.join(missing)} not set: start it with torchrun (torchrun --nproc-per-node 4 -m {__name__} …)")
    try:
        dist.init_process_group(backend)
    except (ValueError, RuntimeError) as e:  # a RANK or port torchrun would not set
        _refuse(f"torch.distributed could not start the {backend} group: {str(e).splitlines()[0]}")
    rank, P = dist.get_rank(), dist.get_world_size()
    try:
        held = shards(n, P, sharding)
    except FlashsimError as e:
        if rank == 0:
            click.echo(f"error: {e}", err=True)
        dist.destroy_process_group()
        raise SystemExit(2) from None
    device = torch.device(f"cuda:{rank % torch.cuda.device_count()}") if backend == "nccl" else torch.device("cpu")
    blocks = GPUBlocks() if backend == "nccl" else NumpyBlocks()
    whole = [torch.from_numpy(x[0, 0]) for x in random_inputs(1, 1, n, n, d, dtype, seed, grad=True)]
    q, k, v, do = (torch.cat([x[r0:r1] for r0, r1 in held[rank]]).to(device) for x in whole)
    scale = 1.0 / np.sqrt(d)
    fwd_steps, bwd_steps = [], []
    o, lse = forward(q, k, v, held, blocks, causal=causal, scale=scale, steps=fwd_steps)
    dq, dk, dv = backward(q, k, v, o, lse, do, held, blocks, causal=causal, scale=scale, steps=bwd_steps)
    mine = {name: x.cpu().numpy() for name, x in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, dq, dk, dv), strict=True)}
    gathered = [None] * P
    dist.all_gather_object(gathered, (mine, fwd_steps, bwd_steps))
    dist.destroy_process_group()
    if rank == 0:
        report = check([g[0] for g in gathered], held, [x.numpy() for x in whole], causal, scale, dtype)
        report |= {"devices": P, "backend": backend, "n": n, "d": d, "dtype": dtype, "causal": causal,
                   "sharding": sharding, "steps": {"forward": [g[1] for g in gathered],
                   "backward": [g[2] for g in gathered]}}  # fmt: skip
        for name, c in report["checks"].items():
            click.echo(f"{name}: max error {c['error']:.3g} ≤ bound {c['bound']:.3g}: {'ok' if c['ok'] else 'FAILED'}")
        for t, per in enumerate(zip(*report["steps"]["forward"], strict=True)):
            attend, wait = max(a for a, _ in per), max(w for _, w in per)
            click.echo(
                f"forward step {t}: attention {attend * 1e3:.2f} ms, waiting for the next shard {wait * 1e3:.2f} ms"
            )
        if out:
            with open(out, "w") as f:
                json.dump(report, f)
        if not all(c["ok"] for c in report["checks"].values()):
            raise SystemExit(1)


def _refuse(message: str):
    click.echo(f"error: {message}", err=True)
    raise SystemExit(2)


def check(parts: list[dict], held, whole, causal: bool, scale: float, dtype: str) -> dict:
    """The shards put back at their rows and held to the float64 reference: O and L within the ring's bound (the
    float32 floor for L), dQ, dK, dV within the float32 gradient bound (fp32 storage only: none is stated for fp16)."""
    from sim.api import reference, tolerance

    q, k, v, do = whole
    full = {name: np.empty((q.shape[0], *parts[0][name].shape[1:]), np.float64) for name in parts[0]}
    for p, chunks in enumerate(held):
        at = 0
        for r0, r1 in chunks:
            for name, x in parts[p].items():
                full[name][r0:r1] = x[at : at + r1 - r0]
            at += r1 - r0
    ref_o, ref_lse = reference.attention(q, k, v, causal=causal, scale=scale)
    refs = dict(zip(("dq", "dk", "dv"), reference.attention_backward(q, k, v, do, causal=causal, scale=scale),
                    strict=True))  # fmt: skip
    v_max = float(np.abs(v.astype(np.float64)).max())
    tol = tolerance.tolerance(  # each rank's blocks are not gathered: Bc = 1, the most rescales, bounds them all
        "ring", dtype, d=q.shape[-1], nk=k.shape[-2], block_cols=1, sigma=tolerance.score_scale(q, k, scale),
        v_max=v_max, ref_max=float(np.abs(ref_o).max()),
    )  # fmt: skip
    bound = np.full(ref_o.shape, tol.bound)
    checks = {"O": (np.abs(full["o"] - ref_o), bound)}
    seen = np.isfinite(ref_lse)
    checks["L"] = (np.abs(full["lse"][seen] - ref_lse[seen]), np.full(seen.sum(), tolerance.lse_bound(ref_lse)))
    if dtype == "fp32":
        for name, ref in refs.items():
            checks["d" + name[1].upper()] = (
                np.abs(full[name] - ref),
                np.full(ref.shape, tolerance.gradient_bound(ref)),
            )
    return {"checks": {name: {"error": float(e.max(initial=0.0)), "bound": float(b.max(initial=0.0)),
                              "ok": bool((e <= b).all())} for name, (e, b) in checks.items()}}  # fmt: skip


if __name__ == "__main__":
    main()
