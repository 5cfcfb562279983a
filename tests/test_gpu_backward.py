"""The backward kernels (rungs 4, 5; rung 7 in test_gpu_rung7.py) against float64, by the FlashAttention project's own criterion for each of dQ,
dK, dV: max|g − g_ref| ≤ 2·max|g_standard − g_ref| + 1e-3, g_standard from the fp16/bf16 standard attention's
backward (P, dP, dS stored in the storage dtype); no gradient element left unwritten (gpu.lab.checks)."""

import pytest

import gpu
from gpu.lab.checks import check_backward, max_error, random_like, random_qkv
from gpu.tiling import backward_tiles

pytestmark = pytest.mark.gpu

HEAD_DIMS = [32, 40, 59, 64, 96, 111, 128]
# (batch, heads, N, Nk): ragged, N < Nk, N > Nk (causal rows that see no key and keys no row sees)
SHAPES = [(2, 2, 113, 113), (1, 2, 77, 300), (1, 2, 300, 77), (1, 1, 1, 1), (1, 1, 1030, 1030)]


def _assert_ok(c):
    assert c.unwritten == 0, f"{c.unwritten} gradient elements never written"
    assert c.ok, c.describe()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("shape", SHAPES[:3], ids=lambda s: "x".join(map(str, s)))
def test_tensorcore(shape, d, dtype, causal):
    _assert_ok(check_backward(*random_qkv(*shape, d, dtype, seed=d + sum(shape)), causal=causal))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES[3:], ids=lambda s: "x".join(map(str, s)))
def test_tensorcore_single_row_and_long(shape, causal):
    _assert_ok(check_backward(*random_qkv(*shape, 128, "bfloat16", seed=5), causal=causal))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("d", [40, 64, 128])
def test_v1_readable(d, dtype, causal):
    for shape in SHAPES[1:3]:
        _assert_ok(check_backward(*random_qkv(*shape, d, dtype, seed=d), causal=causal, kernel=4))


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("tiles", [
    backward_tiles(warps=4, block_rows=64, min_blocks=2),
    backward_tiles(warps=8, block_rows=32),
    backward_tiles(warps=4, block_rows=128),
    backward_tiles(warps=4, block_rows=32, min_blocks=2),
], ids=lambda t: t.describe().replace(" ", "_"))  # fmt: skip
def test_tilings(d, tiles):
    for causal in (False, True):
        q, k, v = random_qkv(1, 2, 333, 300, d, "float16", seed=d)
        _assert_ok(check_backward(q, k, v, causal=causal, kernel=5, tiles=tiles))


def test_gradients_of_blind_rows_and_unseen_keys_are_zero():
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(1, 2, 300, 100, 64, "bfloat16", seed=9)
    o, lse = gpu.flash_attention(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = gpu.flash_attention_backward(q, k, v, o, lse, random_like(q, 1), causal=True)
    assert bool((dq[:, :, :200] == 0).all())  # rows 0 … 199 see no key
    for g in (dq, dk, dv):
        assert not bool(cupy.isnan(g.astype(cupy.float32)).any())


def test_scale_reaches_every_gradient():
    q, k, v = random_qkv(1, 2, 150, 170, 64, "float16", seed=4)
    o, lse = gpu.flash_attention(q, k, v, scale=0.3, return_lse=True)
    do = random_like(q, 2)
    grads = gpu.flash_attention_backward(q, k, v, o, lse, do, scale=0.3)
    refs = gpu.attention_backward_ref(q, k, v, do, scale=0.3)
    for g, r in zip(grads, refs, strict=True):
        assert max_error(g, r) < 2e-2  # fp16 gradients of O(1): a wrong τ (1/8 instead of 0.3) is off by ~1
