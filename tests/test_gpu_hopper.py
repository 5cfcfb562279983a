"""Rung 6 (wgmma + TMA, sm_90a only) against float64 by the criterion every forward rung meets (gpu.lab.checks), on
ragged, causal and N ≠ Nk shapes at d = 64 and 128, fp16 and bf16; its tilings; the toolchain probe; and where
the public call uses it. Skipped, with the reason, on any GPU but an sm_90 one (H100, H200)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu
from gpu import device, flash, geometry, registry
from gpu.lab import hopper_probe, racecheck_probe
from gpu.lab.checks import check, random_qkv
from gpu.lab.harness import TUNE
from sim.core.errors import InputError

pytestmark = [pytest.mark.gpu]


@pytest.fixture(autouse=True)
def _hopper():
    if device.available()[0] and device.capability() != "9.0":
        pytest.skip(f"rung 6 runs on compute capability 9.0 only; this GPU is {device.capability()}")


# (batch, heads, N, Nk, d): one row, ragged, N < Nk, N > Nk (causal rows that see no key), many blocks
SHAPES = [
    (1, 1, 1, 1, 64),
    (2, 3, 113, 113, 64),
    (1, 2, 113, 1023, 128),
    (1, 2, 1023, 113, 64),
    (1, 3, 77, 200, 128),
    (2, 2, 256, 256, 64),
    (1, 1, 1023, 1023, 128),
    (1, 2, 4224, 4224, 128),
    (1, 2, 4100, 3000, 64),
    # more tiles than an H100 has SMs, so that each persistent thread block walks several: Tr odd (a causal pair's
    # lone middle block), N > Nk (causal tiles with no key on the walk), Br = 128 and 192 at d = 64
    (8, 16, 777, 900, 64),
    (4, 16, 2100, 2100, 128),
    (2, 40, 1100, 600, 128),
    (2, 40, 3000, 3000, 64),
]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rung_6(shape, dtype, causal):
    c = check(*random_qkv(*shape, dtype, seed=sum(shape)), causal=causal, kernel=6)
    assert c.ok, c.describe()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 1200),
    nk=st.integers(1, 1200),
    d=st.sampled_from([64, 128]),
    causal=st.booleans(),
    dtype=st.sampled_from(["float16", "bfloat16"]),
    seed=st.integers(0, 2**16),
)
def test_rung_6_any_shape(n, nk, d, causal, dtype, seed):
    c = check(*random_qkv(1, 2, n, nk, d, dtype, seed=seed), causal=causal, kernel=6)
    assert c.ok, c.describe()


@pytest.mark.parametrize("d", [64, 128])
def test_rung_6_tilings(d):
    for name, tiles in TUNE[("forward", d)]:
        if name == 6 and tiles is not None:
            for causal in (False, True):
                c = check(*random_qkv(1, 2, 333, 600, d, "bfloat16", seed=d), causal=causal, kernel=6, tiles=tiles)
                assert c.ok, (tiles.describe(), c.describe())


def test_rows_that_see_no_key_are_zero():
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(1, 2, 300, 100, 64, "float16", seed=7)
    o, lse = gpu.flash_attention(q, k, v, causal=True, kernel=6, return_lse=True)
    blind = 300 - 100  # query r sees keys c ≤ r − 200
    assert bool((o[:, :, :blind] == 0).all()) and bool(cupy.isneginf(lse[:, :, :blind]).all())
    assert bool(cupy.isfinite(lse[:, :, blind:]).all()) and not bool(cupy.isnan(o).any())


@pytest.mark.parametrize(("shape", "causal"), [((4, 16, 2100, 2100, 128), False), ((2, 8, 2600, 1000, 128), True)],
                         ids=["full", "causal-rows-without-keys"])  # fmt: skip
def test_the_tickets_are_back_to_zero_after_every_launch_on_each_stream_and_in_a_graph(shape, causal):
    """Rung 6's ticketed thread blocks (d = 128, N > SHORT_ROWS: geometry.tickets) take their units from two counters
    of the launch's plan (gpu/flash.py, `_tickets`); the last block out sets them back to zero (causal with N > Nk:
    the walk hands out tiles whose rows see no key). Launches back to back, on two streams at once and as a
    CUDA graph's replays each take every unit once: a unit taken twice or never would leave the poison (NaN) in O or
    a row off the float64 reference; each tile is computed by one thread block whichever it is, so every launch's O
    is bit for bit the first's."""
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(*shape, "float16", seed=5)
    c = check(q, k, v, causal=causal, kernel=6)
    assert c.ok, c.describe()
    first = gpu.flash_attention(q, k, v, causal=causal, kernel=6)
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    outs = []
    for _ in range(3):  # the two streams' launches interleaved, each stream with a plan (and tickets) of its own
        for stream in streams:
            with stream:
                outs.append(gpu.flash_attention(q, k, v, causal=causal, kernel=6, poison=True))
    with streams[0]:  # a graph of two launches, captured after the stream's plan is made, replayed three times
        streams[0].synchronize()
        streams[0].begin_capture()
        try:
            captured = [gpu.flash_attention(q, k, v, causal=causal, kernel=6) for _ in range(2)]
        finally:
            graph = streams[0].end_capture()
        for _ in range(3):
            for o in captured:
                o.fill(cupy.nan)
            graph.launch(streams[0])
            streams[0].synchronize()
            assert all(bool((o == first).all()) for o in captured)
    cupy.cuda.Device().synchronize()
    assert all(bool((o == first).all()) for o in outs)
    # every ticketed plan made so far (the default stream's, the two streams'): its tickets are zero
    tickets = [plan.walk[-1] for call in flash._calls.values() for plan in call.plans.values()
               if plan.walk and isinstance(plan.walk[-1], cupy.ndarray)]  # fmt: skip
    assert len(tickets) >= 3 and all(t.get().tolist() == [0, 0] for t in tickets)


@pytest.mark.parametrize(
    "variant",
    [{}, {"kv_heads": 4}, {"kv_heads": 4, "window": [300, 0]}, {"window": [200, 0]}],
    ids=["plain", "gqa", "gqa-window", "window"],
)
def test_the_ticketed_walk_over_packed_sequences_and_windows(variant):
    """The ticketed walk (d = 128 and a sequence longer than gpu.geometry.SHORT_ROWS: geometry.tickets) over a packed
    batch (the host's list without its −1 rows) and windows, causal and full, with tiles that see no key (causal, a
    sequence of 2300 queries and 400 keys: its first 1900 rows see none): the producer hands those out too and the
    consumers write zeros and −∞; against float64."""
    from gpu.lab.variant_checks import check as check_variant
    from gpu.lab.variant_checks import make_inputs

    lengths = {"seqlens_q": [2600, 1, 700, 2300, 64], "seqlens_k": [2600, 5, 900, 400, 64]}
    q, k, v, kw = make_inputs(0, 16, 0, 0, 128, "float16", variant | lengths, seed=9)
    assert geometry.tickets(128, registry.FORWARD[6].tiles_for(128, 2600, True))
    for causal in (False, True):
        c = check_variant(q, k, v, causal=causal, kernel=6, **kw)
        assert c.ok, (causal, c.describe())


def test_nan_flows_through_as_in_attention():
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(1, 1, 300, 300, 128, "bfloat16", seed=11)
    q[0, 0, 10, 3] = cupy.nan
    k[0, 0, 150, 7] = cupy.nan
    o = gpu.flash_attention(q, k, v, causal=True, kernel=6)
    expected = [r == 10 or r >= 150 for r in range(300)]
    assert cupy.isnan(o[0, 0]).all(axis=-1).get().tolist() == expected


def test_the_public_call_uses_rung_6_where_it_runs():
    assert flash.resolve(None, 64).rung == 6 and flash.resolve(None, 128).rung == 6
    assert flash.resolve(None, 96).rung == 3
    q, k, v = random_qkv(1, 2, 200, 200, 96, "float16", seed=1)
    with pytest.raises(InputError, match=r"^kernel: rung 6 takes head dims 64 and 128, got d=96$"):
        gpu.flash_attention(q, k, v, kernel=6)


def test_toolchain_probe():
    for d in (64, 128):
        for dtype in ("float16", "bfloat16"):
            r = hopper_probe.probe(d, dtype)
            assert r["scores"] < 1 and r["values"] < 1, (d, dtype, r)


@pytest.mark.parametrize("handoff", [1, 2, 3, 4, 5, 6, 7])
def test_racecheck_probe_orders_the_reads_before_the_write(handoff):
    """Each ordered hand-off of gpu/lab/racecheck_probe.py: all 128 consumers read the first write's (16, 1)."""
    assert racecheck_probe.launch(handoff) == [16] * 128
