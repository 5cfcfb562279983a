"""Rung 7 (the wgmma + TMA backward, sm_90a only) against float64 by the FlashAttention project's criterion for each
of dQ, dK, dV (gpu.lab.checks.check_backward): ragged, causal, N ≠ Nk, rows that see no key, d = 64 and 128, fp16 and
bf16, its tilings, FlashAttention-3's benchmark lengths; and where the public call uses it. Skipped, with the
reason, on any GPU but an sm_90 one (H100, H200)."""

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu
from gpu import backward, device
from gpu.lab.checks import check_backward, random_like, random_qkv
from gpu.tiling import backward_warpgroup_tiles
from sim.core.errors import InputError

pytestmark = [pytest.mark.gpu]


@pytest.fixture(autouse=True)
def _hopper():
    if device.available()[0] and device.capability() != "9.0":
        pytest.skip(f"rung 7 runs on compute capability 9.0 only; this GPU is {device.capability()}")


# (batch, heads, N, Nk, d): one row, ragged, N < Nk, N > Nk (causal rows that see no key, keys no row sees)
SHAPES = [
    (1, 1, 1, 1, 64),
    (2, 3, 113, 113, 64),
    (1, 2, 113, 1023, 128),
    (1, 2, 1023, 113, 64),
    (1, 3, 77, 200, 128),
    (2, 2, 256, 256, 64),
    (1, 1, 1030, 1030, 128),
    (1, 2, 4100, 3000, 64),
]


def _assert_ok(c):
    assert c.unwritten == 0, f"{c.unwritten} gradient elements never written"
    assert c.ok, c.describe()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rung_7(shape, dtype, causal):
    _assert_ok(check_backward(*random_qkv(*shape, dtype, seed=sum(shape)), causal=causal, kernel=7))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("n", [1024, 2048, 4096, 8192, 16384])
def test_rung_7_at_flashattention3_lengths(n, d, causal):
    _assert_ok(check_backward(*random_qkv(1, 1, n, n, d, "bfloat16", seed=n + d), causal=causal, kernel=7))


@pytest.mark.parametrize(
    ("d", "tiles"),
    [
        (64, backward_warpgroup_tiles(stages=3, split_dq=True)),
        (64, backward_warpgroup_tiles(stages=2)),  # each warpgroup all 64 columns over its own keys
        (64, backward_warpgroup_tiles(stages=2, split_dq=True, dq_atomics=True)),
        (64, backward_warpgroup_tiles(stages=2, split_dq=True, block_rows=128)),
        (128, backward_warpgroup_tiles(stages=3)),
        (128, backward_warpgroup_tiles(stages=2)),  # two 64-column pieces, one after the other, through SRAM
        (128, backward_warpgroup_tiles(stages=3, split_dq=True)),
        (128, backward_warpgroup_tiles(stages=2, split_dq=True, dq_atomics=True)),
    ],
    ids=lambda x: x.describe().replace(" ", "_") if hasattr(x, "describe") else str(x),
)
def test_rung_7_tilings(d, tiles):
    for causal in (False, True):
        q, k, v = random_qkv(1, 2, 333, 300, d, "float16", seed=d)
        _assert_ok(check_backward(q, k, v, causal=causal, kernel=7, tiles=tiles))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(
    ("d", "tiles"),
    [
        (64, backward_warpgroup_tiles(stages=2, split_dq=True)),
        (64, backward_warpgroup_tiles(stages=2)),
        (64, backward_warpgroup_tiles(stages=2, split_dq=True, block_rows=128)),
        (128, backward_warpgroup_tiles(stages=2, split_dq=True)),
        (128, backward_warpgroup_tiles(stages=2)),
    ],
    ids=lambda x: x.describe().replace(" ", "_") if hasattr(x, "describe") else str(x),
)
def test_rung_7_deterministic_is_correct_and_the_same_bit_for_bit(d, tiles, causal):
    # 2 × 3 heads, 1030 queries (17 Q blocks, the last ragged) against 2000 keys (16 K/V blocks adding into each dQ_i)
    q, k, v = random_qkv(2, 3, 1030, 2000, d, "bfloat16", seed=d + causal)
    _assert_ok(check_backward(q, k, v, causal=causal, kernel=7, tiles=tiles, deterministic=True))
    o, lse = gpu.flash_attention(q, k, v, causal=causal, return_lse=True)
    do = random_like(q, 3)
    runs = [
        gpu.flash_attention_backward(q, k, v, o, lse, do, causal=causal, kernel=7, tiles=tiles, deterministic=True)
        for _ in range(3)
    ]
    for again in runs[1:]:
        for g, h in zip(runs[0], again, strict=True):
            assert bool((g.view("uint16") == h.view("uint16")).all())


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rung_7_rounding_dq_itself(shape, causal, monkeypatch):
    # every plane's last thread block rounds its dQ (FUSED_DQ) at any number of planes: one row, ragged, N ≠ Nk,
    # causal rows that see no key (their dQ rows zeros the pre-pass wrote, rounded with the plane)
    monkeypatch.setattr(backward, "FUSED_PLANES", 1)
    _assert_ok(check_backward(*random_qkv(*shape, "float16", seed=sum(shape)), causal=causal, kernel=7))


@pytest.mark.parametrize("d", [64, 128])
def test_rung_7_rounds_dq_itself_from_fused_planes_on(d):
    # 4 × 64 = 256 query planes (the launcher's threshold), ragged, N > Nk: causal rows that see no key
    q, k, v = random_qkv(4, 64, 300, 200, d, "bfloat16", seed=d)
    spec = backward.resolve(7, d)
    assert backward.fused(spec, spec.tiles(d), 4 * 64) and not backward.fused(spec, spec.tiles(d), 4 * 64 - 1)
    for causal in (False, True):
        _assert_ok(check_backward(q, k, v, causal=causal, kernel=7))


@pytest.mark.parametrize("d", [64, 128])
def test_rung_7_rounding_dq_itself_is_the_pass_bit_for_bit_when_deterministic(d, monkeypatch):
    # the same float32 accumulator, rounded by the plane's last thread block or by the third launch
    monkeypatch.setattr(backward, "FUSED_PLANES", 1)
    q, k, v = random_qkv(2, 3, 1030, 2000, d, "float16", seed=d)
    o, lse = gpu.flash_attention(q, k, v, causal=True, return_lse=True)
    do = random_like(q, 3)
    tiles = backward.resolve(7, d).tiles(d)
    grads = [
        gpu.flash_attention_backward(q, k, v, o, lse, do, causal=True, kernel=7, tiles=t, deterministic=True)
        for t in (tiles, dataclasses.replace(tiles, dq_pass=True))
    ]
    for g, h in zip(*grads, strict=True):
        assert bool((g.view("uint16") == h.view("uint16")).all())


def test_deterministic_is_refused_where_dq_adds_in_any_order():
    q, k, v = random_qkv(1, 1, 64, 64, 64, "float16", seed=1)
    o, lse = gpu.flash_attention(q, k, v, return_lse=True)
    with pytest.raises(InputError, match="deterministic: only rung 7"):
        gpu.flash_attention_backward(q, k, v, o, lse, q, kernel=5, deterministic=True)
    with pytest.raises(InputError, match="deterministic: needs rung 7's TMA reduce-adds"):
        atomics = backward_warpgroup_tiles(stages=2, dq_atomics=True)
        gpu.flash_attention_backward(q, k, v, o, lse, q, kernel=7, tiles=atomics, deterministic=True)
    with pytest.raises(InputError, match="deterministic: expected True or False"):
        gpu.flash_attention_backward(q, k, v, o, lse, q, kernel=7, deterministic="yes")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 1200),
    nk=st.integers(1, 1200),
    d=st.sampled_from([64, 128]),
    causal=st.booleans(),
    dtype=st.sampled_from(["float16", "bfloat16"]),
    seed=st.integers(0, 2**16),
)
def test_rung_7_any_shape(n, nk, d, causal, dtype, seed):
    _assert_ok(check_backward(*random_qkv(1, 2, n, nk, d, dtype, seed=seed), causal=causal, kernel=7, seed=seed))


def test_public_call_uses_rung_7_at_d_64_and_128():
    assert backward.resolve(None, 128).rung == 7 and backward.resolve(None, 64).rung == 7
    assert backward.resolve(None, 96).rung == 5


def test_blind_rows_get_zero_gradients():
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(1, 2, 300, 100, 64, "bfloat16", seed=9)
    o, lse = gpu.flash_attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = gpu.flash_attention_backward(q, k, v, o, lse, random_like(q, 1), causal=True, kernel=7)
    assert bool((dq[:, :, :200] == 0).all())  # rows 0 … 199 see no key
    for g in (dq, dk, dv):
        assert not bool(cupy.isnan(g.astype(cupy.float32)).any())
