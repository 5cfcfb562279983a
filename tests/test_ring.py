"""`sim.ring`: attention across P simulated devices equals one device's, and moves the bytes the closed forms say.

Every output and gradient is held to float64 attention from the definition (`sim.api.reference`), within the bounds of
`sim.api.tolerance` (the ring's: each step's partial rounded once, the final O once). Link bytes are checked against
formulas derived here by hand; each device's ledger against `sim.machine.ring_model`, and one case by hand too.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.api import reference, tolerance
from sim.api.ring_api import ring
from sim.core.dtypes import DTYPES, F
from sim.core.errors import InputError
from sim.machine import ring_model
from sim.machine.devices import LINKS

SMALL_SRAM = 6 * 1024  # blocks of a few rows: ragged blocks and many tiles per piece


def inputs(shape, dtype="fp32", seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(DTYPES[dtype]) for _ in range(4)]


def within(x, ref, bound) -> bool:
    return bool((np.abs(x.astype(np.float64) - ref) <= bound).all())


@pytest.mark.parametrize("sharding", ["contiguous", "zigzag"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("P", [1, 2, 4, 8])
def test_output_and_gradients_equal_one_device(P, causal, sharding):
    q, k, v, do = inputs((1, 2, 32, 8))
    r = ring(q, k, v, devices=P, sharding=sharding, causal=causal, do=do, sram_bytes=SMALL_SRAM)
    o, lse = reference.attention(q, k, v, causal=causal)
    # stricter than sim.tolerance's worst case: FlashAttention-2's elementwise bound plus each partial's rounding
    bound = tolerance.output_bound("flash2", "fp32", o, v, k.shape[-2], 1) + tolerance.U["fp32"] * np.abs(v).max()
    assert within(r.output, o, bound)
    assert within(r.lse, lse, tolerance.lse_bound(lse))
    for got, ref in zip((r.dq, r.dk, r.dv), reference.attention_backward(q, k, v, do, causal=causal), strict=True):
        assert within(got, ref, tolerance.gradient_bound(ref))


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("sharding", ["contiguous", "zigzag"])
def test_16_bit_output_within_the_rings_bound(dtype, sharding):
    q, k, v, _ = inputs((64, 16), dtype, seed=1)
    r = ring(q, k, v, devices=4, sharding=sharding, causal=True)
    o, _ = reference.attention(q, k, v, causal=True)
    u = tolerance.U[dtype]
    v_max = np.abs(v.astype(np.float64)).max()
    bound = u * np.abs(o) + u * v_max + 1e-5 * np.abs(o).max()  # the bound as the module docstring derives it
    assert within(r.output, o, bound)
    assert not within(r.output, o, 1e-5 * np.abs(o).max())  # the storage rounding is there to bound


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("P", [1, 2, 4])
def test_ulysses_equals_one_device(P, causal):
    q, k, v, do = inputs((2, 4, 24, 8))
    r = ring(q, k, v, devices=P, scheme="ulysses", causal=causal, do=do)
    o, lse = reference.attention(q, k, v, causal=causal)
    assert within(r.output, o, 1e-5 * np.abs(o).max())
    for run, tensors in ((r.forward, 4), (r.backward, 4)):  # q, k, v there and O back; dO there and dQ, dK, dV back
        for ledger, c in zip(run.ledgers, run.closed_form, strict=True):
            assert (ledger.hbm_read_bytes, ledger.hbm_write_bytes, ledger.flops) == (
                c.hbm_read_bytes, c.hbm_write_bytes, c.flops)  # fmt: skip
        # by hand: each of the 4 tensors, 2 batches × 4 heads × 24/P rows × d = 8 × 4 B, keeps 1/P at home
        assert run.sent == run.closed_link == [tensors * 2 * 4 * (24 // P) * 8 * 4 * (P - 1) // P] * P
    assert within(r.lse, lse, tolerance.lse_bound(lse))
    for got, ref in zip((r.dq, r.dk, r.dv), reference.attention_backward(q, k, v, do, causal=causal), strict=True):
        assert within(got, ref, tolerance.gradient_bound(ref))


@settings(max_examples=25, deadline=None)
@given(
    P=st.integers(1, 5),
    chunk=st.integers(1, 6),
    extra=st.integers(0, 3),
    d=st.integers(1, 12),
    dtype=st.sampled_from(["fp16", "fp32"]),
    causal=st.booleans(),
    sharding=st.sampled_from(["contiguous", "zigzag"]),
    heads=st.integers(1, 2),
)
def test_every_device_and_link_moves_what_the_closed_forms_say(P, chunk, extra, d, dtype, causal, sharding, heads):
    N = 2 * P * chunk + (extra if sharding == "contiguous" else 0)  # contiguous shards may be uneven
    q, k, v, do = inputs((1, heads, N, d), dtype)
    r = ring(q, k, v, devices=P, sharding=sharding, causal=causal, do=do, sram_bytes=SMALL_SRAM)
    for run in (r.forward, r.backward):
        for ledger, c in zip(run.ledgers, run.closed_form, strict=True):
            got = (ledger.hbm_read_bytes, ledger.hbm_write_bytes, ledger.flops, ledger.work["exp"],
                   ledger.work["elementwise"])  # fmt: skip
            assert got == (c.hbm_read_bytes, c.hbm_write_bytes, c.flops, c.exps, c.elementwise)
        assert run.sent == run.closed_link
    s, n = DTYPES[dtype].itemsize, ring_model.sizes(N, P, sharding)
    # by hand: device p sends the shard it holds at steps 0 … P − 2, i.e. every shard but p + 1's (the last it sees)
    fwd = [heads * 2 * d * s * (N - n[(p + 1) % P]) for p in range(P)] if P > 1 else [0]
    assert r.forward.sent == fwd
    # backward: the same K/V, plus P hops of float32 dK, dV: every shard once
    assert r.backward.sent == ([f + heads * 2 * d * F * N for f in fwd] if P > 1 else [0])


def test_one_device_of_a_full_contiguous_ring_by_hand():
    N, d, P = 64, 8, 4
    q, k, v, _ = inputs((N, d))
    r = ring(q, k, v, devices=P, sram_bytes=1 << 20)  # one block per shard: Tr = 1
    n, s, f = N // P, 4, F
    assert (r.block_rows, r.block_cols) == (n, n)
    flash2 = (s * (n * d + 2 * n * d), s * n * d + f * n)  # Q once, K and V once; O and L written
    merge = (n * (f * d + f + s * d + f), f * n * (d + 1))  # O_run, L_run, O_t, L_t read; O_run, L_run written
    reads = P * (flash2[0] + merge[0]) + f * n * d  # the cast reads O_run
    writes = f * n * (d + 1) + P * (flash2[1] + merge[1]) + s * n * d  # zeroed, then the steps, then O
    assert all((led.hbm_read_bytes, led.hbm_write_bytes) == (reads, writes) for led in r.forward.ledgers)


def test_zigzag_balances_a_causal_ring_and_contiguous_does_not():
    N, d, P = 64, 8, 4
    steps = {sh: ring_model.ring_steps(N, d, 4, P, sh, True, 16, 16) for sh in ("contiguous", "zigzag")}
    zig = [[c.flops for c in row] for row in steps["zigzag"][1:]]
    assert all(len(set(row)) == 1 and row[0] > 0 for row in zig)  # every device the same work at every step
    cont = [[c.flops for c in row] for row in steps["contiguous"][1:]]
    n = N // P
    # device p sees shard p − t in full when t ≤ p, nothing after: 4·n²·d FLOPs, or 0
    assert cont == [[4 * n * n * d if t <= p else 0 for p in range(P)] for t in range(1, P)]
    # zigzag: half a shard against a whole one (or the reverse) at every step after the first
    assert zig == [[4 * (n // 2) * n * d] * P for _ in range(1, P)]


def test_ring_sends_p_over_2_times_what_ulysses_does():
    N, d, P, H = 64, 8, 4, 4
    q, k, v, _ = inputs((1, H, N, d))
    ring_bytes = ring(q, k, v, devices=P).forward.sent
    ulysses_bytes = ring(q, k, v, devices=P, scheme="ulysses").forward.sent
    # ring: (P − 1)·2·(N/P)·d·s per head; Ulysses: 4 tensors × (N/P)·d·s × H·(P − 1)/P
    assert ring_bytes == [(P - 1) * 2 * (N // P) * d * 4 * H] * P
    assert ulysses_bytes == [4 * (N // P) * d * 4 * H * (P - 1) // P] * P
    assert ring_bytes[0] == ulysses_bytes[0] * P // 2


def test_time_model_overlaps_each_transfer_with_its_step():
    q, k, v, _ = inputs((1, 2, 64, 8))
    r = ring(q, k, v, devices=4, link_name="PCIe5")
    ring_steps = [s for s in r.forward.steps if s.label.startswith("ring step")]
    link = LINKS["PCIe5"]
    shard_bytes = 2 * 16 * 8 * 4 * 2  # K and V, 16 rows, d = 8, fp32, two heads
    assert [s.transfer for s in ring_steps] == [link.latency + shard_bytes / link.bandwidth] * 3 + [0.0]
    assert all(s.overlapped == max(s.compute, s.transfer) for s in r.forward.steps)
    assert r.forward.overlapped_seconds < r.forward.serial_seconds


def test_minimum_shard_for_overlap():
    from sim.machine.hardware import get

    hw, link = get("H100-SXM"), LINKS["NVLink4"]
    n = ring_model.min_shard(hw, link, "fp16", 2)
    # compute 4·n²·d / peak against transfer 2·n·d·s / bandwidth: equal at n = s·peak / (2·bandwidth)
    assert n == int(np.ceil(2 * 989.4e12 / (2 * 450e9)))
    d = 128
    assert 4 * n * n * d / hw.peak("fp16") >= 2 * n * d * 2 / link.bandwidth
    assert 4 * (n - 1) ** 2 * d / hw.peak("fp16") < 2 * (n - 1) * d * 2 / link.bandwidth


@settings(max_examples=30, deadline=None)
@given(P=st.integers(-3, 40), N=st.integers(1, 24))
def test_bad_device_counts_are_refused_in_one_line(P, N):
    q, k, v, _ = inputs((N, 4))
    for sharding in ("contiguous", "zigzag"):
        ok = P >= 1 and P <= N and (sharding == "contiguous" or N % (2 * P) == 0)
        if ok:
            assert ring(q, k, v, devices=P, sharding=sharding).output.shape == q.shape
        else:
            with pytest.raises(InputError) as e:
                ring(q, k, v, devices=P, sharding=sharding)
            assert "\n" not in str(e.value) and str(e.value).split(":")[0] in ("devices", "sharding")


@pytest.mark.parametrize(
    ("options", "shape", "start"),
    [
        (dict(devices=2, scheme="tree"), (8, 4), "scheme:"),
        (dict(devices=2, sharding="striped"), (8, 4), "sharding:"),
        (dict(devices=2, link_name="carrier-pigeon"), (8, 4), "link:"),
        (dict(devices=3, scheme="ulysses"), (1, 4, 8, 4), "devices:"),
        (dict(devices=2, scheme="ulysses", sharding="zigzag"), (1, 4, 8, 4), "sharding:"),
        (dict(devices=True), (8, 4), "devices:"),
        (dict(devices=2, traced=5, record="steps"), (8, 4), "traced:"),
    ],
)
def test_bad_options_are_refused_in_one_line(options, shape, start):
    q, k, v, _ = inputs(shape)
    with pytest.raises(InputError) as e:
        ring(q, k, v, **options)
    assert str(e.value).startswith(start) and "\n" not in str(e.value)


def test_cross_attention_is_refused():
    q, k, v, _ = inputs((8, 4))
    with pytest.raises(InputError, match="one sequence"):
        ring(q, k[:4], v[:4], devices=2)


def test_hbm_a_device_holds_counted_by_hand():
    q, k, v, _ = inputs((1, 2, 64, 8))
    r = ring(q, k, v, devices=4)
    n, d, s, f = 16, 8, 4, F
    # its Q, K, V; the K/V in hand and the K/V arriving; O_run, L_run; one partial O_t, L_t; O
    per_head = 3 * s * n * d + 2 * 2 * s * n * d + f * n * (d + 1) + (s * n * d + f * n) + s * n * d
    assert r.hbm_per_device == 2 * per_head
    # what the simulated device still holds at the end is that, less the buffer a next shard would arrive in
    resident = {name: x for name, x in _device_hbm(q, k, v).items() if x.base is None}
    assert sum(x.nbytes for x in resident.values()) == per_head - 2 * s * n * d


def _device_hbm(q, k, v) -> dict:
    """Device 0's HBM after a ring forward of one head (its own arrays, not the views the kernels were handed)."""
    from sim.algorithms import ring as ring_listing
    from sim.machine.devices import Devices
    from sim.machine.sharding import shards

    held, devices = shards(64, 4, "contiguous"), Devices(4, 1 << 20)
    for p, chip in enumerate(devices.chips):
        for name, x in (("Q_p", q), ("K_p", k), ("V_p", v)):
            chip.hbm.place(name, x[0, 0][held[p][0][0] : held[p][0][1]].copy())
    ring_listing.forward(devices, held, Br=16, Bc=16, Bm=16, scale=1 / np.sqrt(8), causal=False)
    return devices.chips[0].hbm.tensors
