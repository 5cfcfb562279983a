"""The forward kernels (rungs 1–3) against float64, by FlashAttention's own criterion (gpu.lab.checks): max|o − ref| ≤
2·max|o_standard − ref| + 1e-3 with o_standard the fp16/bf16 standard attention, lse within its stated tolerance,
and no output element left unwritten (outputs are poisoned with NaN before each launch)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu
from gpu.lab.checks import check, random_qkv
from gpu.tiling import forward_tiles

pytestmark = pytest.mark.gpu

# (batch, heads, N, Nk, d): single row, ragged, N < Nk, N > Nk (causal rows that see no key), odd d, long
SHAPES = [
    (1, 1, 1, 1, 64),
    (2, 3, 113, 113, 64),
    (1, 2, 113, 1023, 40),
    (1, 2, 1023, 113, 59),
    (2, 2, 256, 256, 32),
    (1, 3, 77, 200, 96),
    (1, 2, 4224, 4224, 128),
    (1, 1, 1023, 1023, 128),
]


@pytest.mark.parametrize("kernel", [2, 3])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_tensorcore(shape, dtype, causal, kernel):
    c = check(*random_qkv(*shape, dtype, seed=sum(shape)), causal=causal, kernel=kernel)
    assert c.ok, c.describe()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES[:6], ids=lambda s: "x".join(map(str, s)))
def test_v1_readable(shape, dtype, causal):
    c = check(*random_qkv(*shape, dtype, seed=sum(shape)), causal=causal, kernel=1)
    assert c.ok, c.describe()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 700),
    nk=st.integers(1, 700),
    d=st.sampled_from([16, 40, 64, 80, 128]),
    causal=st.booleans(),
    dtype=st.sampled_from(["float16", "bfloat16"]),
    seed=st.integers(0, 2**16),
)
def test_default_any_shape(n, nk, d, causal, dtype, seed):
    c = check(*random_qkv(1, 2, n, nk, d, dtype, seed=seed), causal=causal)
    assert c.ok, c.describe()


@pytest.mark.parametrize("kernel", [1, 2, 3])
def test_rows_that_see_no_key_are_zero(kernel):
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(1, 2, 300, 100, 64, "float16", seed=7)
    o, lse = gpu.flash_attention(q, k, v, causal=True, kernel=kernel, return_lse=True)
    blind = 300 - 100  # query r sees keys c ≤ r − 200
    assert not bool(cupy.isnan(o).any()) and not bool(cupy.isnan(lse).any())
    assert bool((o[:, :, :blind] == 0).all()) and bool(cupy.isneginf(lse[:, :, :blind]).all())
    assert bool(cupy.isfinite(lse[:, :, blind:]).all())


def test_default_returns_o_and_return_lse_adds_lse():
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(1, 2, 200, 300, 64, "bfloat16", seed=3)
    o = gpu.flash_attention(q, k, v, scale=0.3)
    o2, lse = gpu.flash_attention(q, k, v, scale=0.3, return_lse=True)
    _, lse_ref = gpu.attention_ref(q, k, v, scale=0.3)
    assert isinstance(o, cupy.ndarray) and o.shape == q.shape and bool((o == o2).all())
    assert float(cupy.abs(lse - lse_ref).max()) < 1e-3


@pytest.mark.parametrize("kernel", [1, 2, 3])
def test_nan_flows_through_as_in_attention(kernel):
    """By default nothing checks the inputs: a NaN in q reaches exactly its row, a NaN in k every row that sees
    that key (and no row before it, under the causal mask), as in softmax(q kᵀ) v."""
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(1, 1, 96, 96, 64, "float16", seed=11)
    q[0, 0, 10, 3] = cupy.nan
    k[0, 0, 50, 7] = cupy.nan
    o, lse = gpu.flash_attention(q, k, v, causal=True, kernel=kernel, return_lse=True)
    rows_nan = cupy.isnan(o[0, 0]).all(axis=-1).get()
    expected = [r == 10 or r >= 50 for r in range(96)]
    assert rows_nan.tolist() == expected
    assert cupy.isnan(lse[0, 0]).get().tolist() == expected


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kernel", [2, 3])
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[2], SHAPES[3], SHAPES[7]], ids=lambda s: "x".join(map(str, s)))
def test_swizzled_rows(shape, kernel, causal):
    spec = gpu.FORWARD[kernel]
    tiles = spec.default_tiles(shape[-1])
    tiles = forward_tiles(tiles.warps, tiles.m_tiles, tiles.block_cols, tiles.q_in_regs, tiles.min_blocks, swizzle=True)
    c = check(*random_qkv(*shape, "bfloat16", seed=sum(shape)), causal=causal, kernel=kernel, tiles=tiles)
    assert c.ok, c.describe()


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("tiles", [
    forward_tiles(warps=4, m_tiles=2, block_cols=64, q_in_regs=False, min_blocks=2),
    forward_tiles(warps=8, m_tiles=1, block_cols=64, q_in_regs=True, min_blocks=1),
], ids=["128x64-qsmem", "8warps"])  # fmt: skip
def test_v3_tilings(d, tiles):
    for causal in (False, True):
        c = check(*random_qkv(1, 2, 333, 300, d, "float16", seed=d), causal=causal, kernel=3, tiles=tiles)
        assert c.ok, c.describe()
