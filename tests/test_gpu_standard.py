"""Standard attention (cuBLAS matmuls + the row kernels, S, P, dP, dS in device memory) against float64.

S and P are stored in the input dtype, so the output's error is a few units of its rounding (eps = 2⁻¹⁰ fp16, 2⁻⁷
bf16): S ≈ ±40 carries 40·eps/2 of rounding, times the 1/√d scale, and P's own rounding adds eps per element;
the bound 10·eps covers that and still fails on a wrong mask or scale (errors of order 0.1 to 1).
The backward stores dP (|dP| up to ~30 for unit-normal inputs at d = 64) and dS in the input dtype too: each
carries about 30·eps/2 of rounding, and dQ, dK sum ~200 such terms with random signs (√200 ≈ 14 times one), times
τ = 1/8: about 2·eps, so 20·eps of the largest gradient has room and still fails on a wrong mask or scale."""

import pytest

import gpu
from gpu.lab.checks import max_error, random_like, random_qkv

pytestmark = pytest.mark.gpu
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(2, 3, 113, 113, 64), (1, 2, 300, 100, 40), (1, 2, 100, 513, 128)], ids=str)
def test_standard_matches_float64(shape, dtype, causal):
    q, k, v = random_qkv(*shape, dtype, seed=5)
    o = gpu.standard_attention(q, k, v, causal=causal)
    o_ref, _ = gpu.attention_ref(q, k, v, causal=causal)
    assert max_error(o, o_ref) <= 10 * EPS[dtype]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_standard_backward_matches_float64(dtype, causal):
    cupy = pytest.importorskip("cupy")
    q, k, v = random_qkv(2, 2, 113, 200, 64, dtype, seed=6)
    do = random_like(q, 3)
    _, probs = gpu.standard_attention(q, k, v, causal=causal, return_probs=True)
    grads = gpu.standard_attention_backward(q, k, v, probs, do)
    refs = gpu.attention_backward_ref(q, k, v, do, causal=causal)
    for g, r in zip(grads, refs, strict=True):
        assert max_error(g, r) <= 20 * EPS[dtype] * max(1.0, float(cupy.abs(r).max()))
