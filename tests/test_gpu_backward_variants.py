"""The backward's variants on rung 5 and on rung 7 (sm_90): GQA, window, ALiBi, softcap, packed batches, and their
combinations; dQ, dK, dV
against float64 from the definition (sim.api.reference_variants, NumPy on the host: it shares no code with the
kernels or gpu/variants.py) by the FlashAttention project's criterion as tests/test_gpu_backward.py states it,
max|g − g_ref| ≤ 2·max|g_standard − g_ref| + 1e-3, g_standard from standard attention's backward in the storage dtype
with the same variant (built here: S, P, dP, dS rounded to fp16/bf16); no gradient element left unwritten. Ragged N,
N ≠ Nk both ways, causal and not, fp16 and bf16, d = 64 and 128, and through gpu.autograd. The argument checks and
the rule that picks the rung run on the CPU (hypothesis), and every build the launcher makes is compiled with nvcc."""

import itertools
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu import backward, registry, source, variants
from gpu.lab import variant_checks
from sim.api import reference_variants
from sim.core.errors import InputError

# the forward's cases and one more ("alibi per batch": (B, Hq) slopes); heads = 4
CASES = {**variant_checks.CASES, "alibi per batch": {"alibi": True}}
PACKED = variant_checks.PACKED
SETUPS = [(64, "float16"), (128, "bfloat16")]  # (d, dtype)
RUNG7 = {"gqa", "window", "alibi", "softcap", "packed"}  # what rung 7 takes: every variant
# rung 7's packed cases beside PACKED's: GQA and a window with ragged lengths, and sequences of several Q and K/V
# blocks (items > STAGES, N ≠ Nk both ways, one sequence of one row between longer ones)
PACKED7 = {
    "varlen gqa window": {"kv_heads": 2, "window": [60, -1], "seqlens_q": [1, 130, 77, 200],
                          "seqlens_k": [50, 129, 300, 200]},
    "varlen long": {"kv_heads": 1, "seqlens_q": [700, 1, 333, 1030], "seqlens_k": [650, 90, 333, 1100]},
}  # fmt: skip
SHAPES = [(2, 4, 200, 333), (1, 4, 333, 200)]  # (batch, heads, N, Nk): N < Nk, and N > Nk (causal rows see no key)


def _gpu(rung=5):
    pytest.importorskip("cupy")
    from gpu import device

    if not device.available()[0]:
        pytest.skip("no GPU")
    if rung == 7 and device.capability() != "9.0":
        pytest.skip(f"rung 7 runs on compute capability 9.0 only; this GPU is {device.capability()}")


def _inputs(batch, heads, n, nk, d, dtype, case, variant, seed):
    from gpu.lab.checks import random_like
    from gpu.lab.variant_checks import make_inputs

    q, k, v, kw = make_inputs(batch, heads, n, nk, d, dtype, variant, seed=seed)
    if case == "alibi per batch":  # one slope row per batch entry
        kw["alibi_slopes"] = np.outer(np.arange(1, batch + 1), kw["alibi_slopes"]) / batch
    return q, k, v, kw, random_like(q, seed + 1)


def standard_backward(q, k, v, do, *, causal=False, window=None, alibi_slopes=None, softcap=None):
    """(dq, dk, dv) of standard attention with the variant, in the storage dtype on the device (B, Hq, N, d): P from
    gpu.lab.variant_checks.probabilities (S, P rounded); dV = Pᵀ dO, dP = dO Vᵀ, dS = P ∘ (dP − rowsum(P ∘ dP))
    (times 1 − tanh² with a softcap), dQ = τ dS K, dK = τ dSᵀ Q, each product rounded; dK, dV summed over the group."""
    from gpu import dtypes
    from gpu.lab.variant_checks import probabilities

    variant = {"causal": causal, "window": window, "alibi_slopes": alibi_slopes, "softcap": softcap}
    p, t, tau, qf, kf, vf, rnd = probabilities(q, k, v, **variant)
    dof = dtypes.to_float32(do)
    b, hq, _, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    dv = rnd(p.swapaxes(-1, -2) @ dof)
    dp = rnd(dof @ vf.swapaxes(-1, -2))
    ds = rnd(p * (dp - (p * dp).sum(axis=-1, keepdims=True)))
    if t is not None:
        ds = rnd(ds * (1 - t * t))
    dq = rnd(tau * (ds @ kf))
    dk = rnd(tau * (ds.swapaxes(-1, -2) @ qf))
    group = lambda g: g.reshape(b, hkv, hq // hkv, nk, d).sum(axis=2)  # noqa: E731
    return dq, group(dk), group(dv)


def _standard_packed(q, k, v, do, cq, ck, **variant):
    """`standard_backward` sequence by sequence of a packed batch: dq (total_q, Hq, d), dk, dv (total_k, Hkv, d)."""
    import cupy

    grads = [cupy.empty(x.shape, cupy.float32) for x in (q, k, v)]
    for a0, a1, b0, b1 in zip(cq[:-1], cq[1:], ck[:-1], ck[1:], strict=True):
        qb, kb, vb, dob = (
            cupy.ascontiguousarray(x[s0:s1].swapaxes(0, 1)[None])
            for x, s0, s1 in ((q, a0, a1), (k, b0, b1), (v, b0, b1), (do, a0, a1))
        )
        for g, part, (s0, s1) in zip(
            grads, standard_backward(qb, kb, vb, dob, **variant), ((a0, a1), (b0, b1), (b0, b1)), strict=True
        ):
            g[s0:s1] = part[0].swapaxes(0, 1)
    return grads


def _judge(grads, refs, standards):
    """Each gradient within FlashAttention's bound, none unwritten (poisoned with NaN before the launch)."""
    import cupy

    from gpu import dtypes
    from gpu.lab.checks import max_error

    for name, g, r, s in zip(("dq", "dk", "dv"), grads, refs, standards, strict=True):
        assert g.shape == r.shape, f"{name}: shape {g.shape}, expected {r.shape}"
        assert int(cupy.isnan(dtypes.to_float32(g)).sum()) == 0, f"{name}: elements never written"
        r = cupy.asarray(r)
        err, bound = max_error(g, r), 2 * max_error(s, r) + 1e-3
        assert err <= bound, f"{name}: max error {err:.3g} > bound {bound:.3g}"


def _host(x) -> np.ndarray:
    from gpu.lab.variant_checks import host

    return host(x)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"d{s[0]}-{s[1]}")
@pytest.mark.parametrize("rung", [5, 7])
def test_variant_backward(rung, setup, case, shape, causal):
    _gpu(rung)
    import gpu

    d, dtype = setup
    q, k, v, kw, do = _inputs(*shape, d, dtype, case, CASES[case], seed=d + shape[2])
    o, lse = gpu.flash_attention(q, k, v, causal=causal, return_lse=True, **kw)
    grads = gpu.flash_attention_backward(q, k, v, o, lse, do, causal=causal, poison=True, kernel=rung, **kw)
    refs = reference_variants.attention_backward(*(_host(x) for x in (q, k, v, do)), causal=causal, **kw)
    _judge(grads, refs, standard_backward(q, k, v, do, causal=causal, **kw))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("case", {**PACKED, **PACKED7})
@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"d{s[0]}-{s[1]}")
@pytest.mark.parametrize("rung", [5, 7])
def test_packed_backward(rung, setup, case, causal):
    cases = {**PACKED, **PACKED7}
    _gpu(rung)
    import gpu
    from gpu.lab.checks import random_like
    from gpu.lab.variant_checks import make_inputs

    d, dtype = setup
    q, k, v, kw = make_inputs(1, 4, 0, 0, d, dtype, cases[case], seed=d)
    do = random_like(q, 3)
    o, lse = gpu.flash_attention(q, k, v, causal=causal, return_lse=True, **kw)
    grads = gpu.flash_attention_backward(q, k, v, o, lse, do, causal=causal, poison=True, kernel=rung, **kw)
    cq, ck = kw.pop("cu_seqlens_q"), kw.pop("cu_seqlens_k")
    refs = reference_variants.varlen_backward(*(_host(x) for x in (q, k, v, do)), cq, ck, causal=causal, **kw)
    _judge(grads, refs, _standard_packed(q, k, v, do, cq, ck, causal=causal, **kw))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_rung7_packed_deterministic_is_bit_for_bit(causal):
    _gpu(7)
    import cupy

    import gpu
    from gpu.lab.checks import random_like
    from gpu.lab.variant_checks import make_inputs

    q, k, v, kw = make_inputs(1, 4, 0, 0, 128, "bfloat16", PACKED7["varlen long"], seed=7)
    do = random_like(q, 8)
    o, lse = gpu.flash_attention(q, k, v, causal=causal, return_lse=True, **kw)
    runs = [gpu.flash_attention_backward(q, k, v, o, lse, do, causal=causal, kernel=7, deterministic=True, **kw)
            for _ in "ab"]  # fmt: skip
    assert all(bool(cupy.array_equal(a, b)) for a, b in zip(*runs, strict=True))
    cq, ck = kw.pop("cu_seqlens_q"), kw.pop("cu_seqlens_k")
    refs = reference_variants.varlen_backward(*(_host(x) for x in (q, k, v, do)), cq, ck, causal=causal, **kw)
    _judge(runs[0], refs, _standard_packed(q, k, v, do, cq, ck, causal=causal, **kw))


@pytest.mark.gpu
def test_rung7_gqa_deterministic_is_bit_for_bit():
    _gpu(7)
    import cupy

    import gpu

    q, k, v, _, do = _inputs(2, 4, 300, 333, 128, "bfloat16", "mqa", CASES["mqa"], seed=5)
    o, lse = gpu.flash_attention(q, k, v, causal=True, return_lse=True)
    runs = [gpu.flash_attention_backward(q, k, v, o, lse, do, causal=True, kernel=7, deterministic=True) for _ in "ab"]
    assert all(bool(cupy.array_equal(a, b)) for a, b in zip(*runs, strict=True))
    refs = reference_variants.attention_backward(*(_host(x) for x in (q, k, v, do)), causal=True)
    _judge(runs[0], refs, standard_backward(q, k, v, do, causal=True))


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kw", [{"window": (50, 20)}, {"window": (50, 20), "softcap": 3.0}], ids=["window", "softcap"])
def test_autograd_gqa_window(kw, causal):
    _gpu()
    torch = pytest.importorskip("torch")
    from gpu.autograd import attention
    from gpu.dlpack import as_cupy

    q, k, v, _, do = _inputs(2, 4, 150, 260, 64, "bfloat16", "gqa", CASES["gqa"], seed=11)
    tq, tk, tv = (torch.from_dlpack(x).requires_grad_(True) for x in (q, k, v))
    o = attention(tq, tk, tv, causal=causal, **kw)
    o.backward(torch.from_dlpack(do))
    grads = tuple(as_cupy(x.grad) for x in (tq, tk, tv))
    refs = reference_variants.attention_backward(*(_host(x) for x in (q, k, v, do)), causal=causal, **kw)
    _judge(grads, refs, standard_backward(q, k, v, do, causal=causal, **kw))


@pytest.mark.gpu
def test_hostile_arguments_on_the_device():
    _gpu()
    import gpu
    from gpu import device
    from gpu.lab.checks import random_like
    from gpu.lab.variant_checks import make_inputs

    q, k, v, kw = make_inputs(1, 4, 0, 0, 64, "float16", PACKED["varlen"])
    o, lse = gpu.flash_attention(q, k, v, return_lse=True, **kw)
    do = random_like(q, 1)
    with pytest.raises(InputError, match=r"^lse: expected float32 shaped \(408, 4\)"):
        gpu.flash_attention_backward(q, k, v, o, lse.T, do, **kw)
    with pytest.raises(InputError, match=r"^do: expected a CuPy array shaped \(408, 4, 64\)"):
        gpu.flash_attention_backward(q, k, v, o, lse, do[:-1], **kw)
    with pytest.raises(InputError, match=r"^deterministic: only rung 7"):
        gpu.flash_attention_backward(q, k, v, o, lse, do, deterministic=True, kernel=5, **kw)
    q, k, v = (x[None].swapaxes(1, 2)[:, :, :100].copy() for x in (q, k[:, :2], v[:, :2]))  # (1, 4|2, 100, 64)
    o, lse = gpu.flash_attention(q, k, v, return_lse=True)
    with pytest.raises(InputError, match=r"^max_seqlen_q, max_seqlen_k: only for a packed batch"):
        gpu.flash_attention_backward(q, k, v, o, lse, random_like(q, 2), max_seqlen_q=100)
    with pytest.raises(InputError, match=r"^kernel: rung 4 does not take gqa \(rung 5 takes every variant\)$"):
        gpu.flash_attention_backward(q, k, v, o, lse, random_like(q, 2), kernel=4)
    if device.capability() == "9.0":
        with pytest.raises(InputError, match=r"^deterministic: not with a window"):
            gpu.flash_attention_backward(q, k, v, o, lse, random_like(q, 2), window=(9, 0), deterministic=True)


# -- on the CPU: the rule that picks the rung, the refusals, the builds ----------------------------------------------

CALLS = st.builds(
    variants.Variant,
    group=st.integers(1, 8),
    window=st.none() | st.tuples(st.integers(-1, 5000), st.integers(-1, 5000)),
    softcap=st.none() | st.floats(0.1, 100),
    slopes=st.none() | st.just(np.zeros(4)),
).filter(lambda x: not x.plain)


@given(CALLS, st.sampled_from([32, 64, 96, 128]), st.sampled_from([None, "8.0", "8.9", "9.0"]))
def test_the_default_is_rung_7_where_it_runs_and_takes_the_call(variant, d, cc):
    hopper = cc == "9.0" and d in (64, 128)
    assert registry.backward(None, d, cc, variant.kinds).rung == (7 if hopper and RUNG7 >= set(variant.kinds) else 5)
    assert registry.backward(None, d, cc).rung == (7 if hopper else 5)  # a plain call: unchanged
    assert backward.resolve(5, d, variant).rung == 5


@given(CALLS, st.sampled_from([4, 7, "7"]))
def test_a_rung_refuses_the_variants_it_does_not_take_in_one_line(variant, kernel):
    missing = [x for x in variant.kinds if x not in (RUNG7 if int(kernel) == 7 else ())]
    if not missing:
        assert backward.resolve(kernel, 64, variant).rung == 7
        return
    with pytest.raises(InputError) as e:
        backward.resolve(kernel, 64, variant)
    assert str(e.value) == f"kernel: rung {kernel} does not take {', '.join(missing)} (rung 5 takes every variant)"


def test_deterministic_refuses_a_window():
    seven = registry.backward(7)
    backward.check_deterministic(seven, seven.tiles(64), True, variants.Variant(group=4))  # GQA: still in order
    with pytest.raises(InputError, match=r"^deterministic: not with a window"):
        backward.check_deterministic(seven, seven.tiles(64), True, variants.Variant(window=(100, 0)))


def test_the_kernels_name_what_they_take():
    assert registry.backward(5).variants == registry.VARIANTS == ("gqa", "window", "alibi", "softcap", "packed")
    assert set(registry.backward(7).variants) == RUNG7 and registry.backward(4).variants == ()
    assert variants.Variant(group=2, window=(3, 0), softcap=1.0).kinds == ("gqa", "window", "softcap")


NVCC = shutil.which("nvcc") or next(
    (p for p in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc") if Path(p).exists()), None
)
# every build of rung 5 the launcher makes with a variant (VARLEN × SOFTCAP × ALIBI), each at a head dim and dtype
BUILDS = [
    (build, d, dtype)
    for build, (d, dtype) in zip(
        itertools.product((0, 1), repeat=3),
        itertools.cycle([(64, "float16"), (128, "bfloat16"), (40, "float16")]),
        strict=False,
    )
]


def _compile(tmp_path, spec, arch, defines):
    cu = tmp_path / spec.file
    cu.write_text(source.render(spec.file, defines))
    run = subprocess.run(
        [NVCC, "-ptx", f"-arch={arch}", "-o", str(tmp_path / "out.ptx"), str(cu)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert spec.function in (tmp_path / "out.ptx").read_text()


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("case", BUILDS, ids=lambda c: "varlen{}-softcap{}-alibi{}-d{}".format(*c[0], c[1]))
def test_every_variant_build_compiles(tmp_path, arch, case):
    (varlen, softcap, alibi), d, dtype = case
    spec = registry.backward(5)
    defines = spec.defines(d, dtype, None) | {"VARIANTS": 1, "VARLEN": varlen, "SOFTCAP": softcap, "ALIBI": alibi}
    assert defines == spec.defines(d, dtype, None) | variants.Variant(
        group=2, softcap=1.0 if softcap else None, slopes=object() if alibi else None,
        cu_seqlens_q=object() if varlen else None, cu_seqlens_k=object() if varlen else None,
    ).defines()  # fmt: skip
    _compile(tmp_path, spec, arch, defines)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("packed", [0, 1])
@pytest.mark.parametrize("deterministic", [0, 1])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("scored", ["", "softcap", "alibi", "softcap alibi"])
def test_every_rung7_variant_build_compiles(tmp_path, d, deterministic, packed, scored):
    spec = registry.backward(7)
    cu = object() if packed else None
    build = variants.Variant(group=2, window=(5, 0), cu_seqlens_q=cu, cu_seqlens_k=cu,
                             softcap=1.0 if "softcap" in scored else None,
                             slopes=object() if "alibi" in scored else None).defines()  # fmt: skip
    build |= {"DETERMINISTIC": deterministic}
    _compile(tmp_path, spec, "sm_90a", spec.defines(d, "float16" if d == 64 else "bfloat16", None) | build)
