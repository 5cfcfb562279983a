"""Standard attention (cuBLAS matmuls + the softmax kernel, S and P in device memory) against float64.

S and P are stored in the input dtype, so the error is a few units of its rounding (eps = 2⁻¹⁰ fp16, 2⁻⁷ bf16):
S ≈ ±40 carries 40·eps/2 of rounding, times the 1/√d scale, and P's own rounding adds eps per element;
the bound 10·eps covers that and still fails on a wrong mask or scale (errors of order 0.1 to 1)."""

import pytest

import gpu
from gpu.harness import random_qkv

pytestmark = pytest.mark.gpu
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(2, 3, 113, 113, 64), (1, 2, 300, 100, 40), (1, 2, 100, 513, 128)], ids=str)
def test_standard_matches_float64(shape, dtype, causal):
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(*shape, dtype, seed=5)
    o = gpu.standard_attention(q, k, v, causal=causal)
    o_ref, _ = gpu.attention_ref(q, k, v, causal=causal)
    of = gpu.dtypes.to_float32(o).astype(cupy.float64)
    assert not bool(cupy.isnan(of).any())
    assert float(cupy.abs(of - o_ref).max()) <= 10 * EPS[dtype]
