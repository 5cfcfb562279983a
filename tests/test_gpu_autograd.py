"""The PyTorch wrappers (gpu.autograd) and the training demo on a GPU: gradients through torch.autograd meet the same
criterion as the kernels called directly, and a short training run gives one loss curve with either attention."""

import pytest

from gpu.lab.checks import max_error

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_gradients_through_autograd(dtype, causal):
    from gpu.autograd import attention
    from gpu.dlpack import as_cupy
    from gpu.reference import attention_backward_ref, attention_ref

    g = torch.Generator(device="cuda").manual_seed(0)
    tdt = getattr(torch, dtype)
    # q, k, v as a model makes them: one projection, split and permuted (not contiguous)
    qkv = torch.randn(2, 150, 3, 3, 64, device="cuda", generator=g).to(tdt).permute(2, 0, 3, 1, 4)
    do = torch.randn(2, 3, 150, 64, device="cuda", generator=g).to(tdt)
    grads, outs = {}, {}
    for impl in ("flash", "standard"):
        q, k, v = (x.detach().clone().requires_grad_() for x in qkv)
        outs[impl] = attention(q, k, v, causal=causal, impl=impl)
        outs[impl].backward(do)
        grads[impl] = [as_cupy(x.grad) for x in (q, k, v)]
    q, k, v = (as_cupy(x.contiguous()) for x in qkv)
    o_ref, _ = attention_ref(q, k, v, causal=causal)
    refs = attention_backward_ref(q, k, v, as_cupy(do), causal=causal)
    assert max_error(as_cupy(outs["flash"]), o_ref) <= 2 * max_error(as_cupy(outs["standard"]), o_ref) + 1e-3
    for g_flash, g_std, ref in zip(grads["flash"], grads["standard"], refs, strict=True):
        assert max_error(g_flash, ref) <= 2 * max_error(g_std, ref) + 1e-3


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_keys_longer_than_queries_get_gradients_shaped_like_k_and_v(causal):
    # Nk ≠ N: dk and dv take k's and v's shape (before run 41-autohost14 all three were made like do: refused by
    # autograd); two steps of one key, the second through the remembered plan, at other addresses
    from gpu.autograd import attention
    from gpu.dlpack import as_cupy
    from gpu.reference import attention_backward_ref

    g = torch.Generator(device="cuda").manual_seed(7)
    q0, do = (torch.randn(2, 3, 100, 64, device="cuda", generator=g).half() for _ in range(2))
    k0, v0 = (torch.randn(2, 3, 230, 64, device="cuda", generator=g).half() for _ in range(2))
    refs = attention_backward_ref(*(as_cupy(x) for x in (q0, k0, v0, do)), causal=causal)
    for _ in range(2):
        q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
        got = torch.autograd.grad(attention(q, k, v, causal=causal), (q, k, v), do)
        q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
        std = torch.autograd.grad(attention(q, k, v, causal=causal, impl="standard"), (q, k, v), do)
        for x, baseline, ref in zip(got, std, refs, strict=True):
            assert x.shape == baseline.shape
            assert max_error(as_cupy(x), ref) <= 2 * max_error(as_cupy(baseline), ref) + 1e-3


@pytest.mark.parametrize("d", [64, 128])
def test_deterministic_gradients_through_autograd(d):
    from gpu.autograd import attention
    from gpu.dlpack import as_cupy
    from gpu.reference import attention_backward_ref
    from sim.core.errors import InputError

    g = torch.Generator(device="cuda").manual_seed(d)
    q0, k0, v0, do = (torch.randn(1, 4, 1100, d, device="cuda", generator=g).to(torch.bfloat16) for _ in range(4))
    runs = []
    for _ in range(2):
        q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
        runs.append(torch.autograd.grad(attention(q, k, v, causal=True, deterministic=True), (q, k, v), do))
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
    std = torch.autograd.grad(attention(q, k, v, causal=True, impl="standard"), (q, k, v), do)
    refs = attention_backward_ref(*(as_cupy(x) for x in (q0, k0, v0, do)), causal=True)
    for got, baseline, ref in zip(runs[0], std, refs, strict=True):
        assert max_error(as_cupy(got), ref) <= 2 * max_error(as_cupy(baseline), ref) + 1e-3
    with pytest.raises(InputError, match="deterministic: expected True or False"):
        attention(q, k, v, impl="standard", deterministic=True)


def test_deterministic_reaches_the_backward_of_a_call_with_variants():
    # a packed batch with GQA: rung 7 (sm_90) orders its dQ additions, so two steps agree bit for bit and meet the
    # criterion against float64; with a softcap too (rung 7 since run 47); a window it refuses in one line (its turns
    # assume every K/V block before j visits Q block i). Before run 46 the variant path dropped the argument.
    import cupy
    import numpy as np

    from gpu import device
    from gpu.autograd import attention
    from gpu.dlpack import as_cupy
    from gpu.lab.variant_checks import host, make_inputs
    from sim.api import reference_variants
    from sim.core.errors import InputError
    from tests.test_gpu_backward_variants import _standard_packed  # standard attention's, sequence by sequence

    if device.capability() != "9.0":
        pytest.skip("rung 7 (the backward that orders its dQ additions) runs on compute capability 9.0 only")
    lengths = {"kv_heads": 2, "seqlens_q": [300, 1, 170], "seqlens_k": [250, 90, 170]}
    q0, k0, v0, kw = make_inputs(1, 4, 0, 0, 128, "float16", lengths, seed=3)
    q0, k0, v0 = (torch.from_dlpack(x) for x in (q0, k0, v0))
    do = torch.randn(q0.shape, device="cuda", generator=torch.Generator(device="cuda").manual_seed(4)).to(q0.dtype)
    runs = []
    for _ in range(2):
        q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
        runs.append(torch.autograd.grad(attention(q, k, v, causal=True, deterministic=True, **kw), (q, k, v), do))
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    cq, ck = np.asarray(kw["cu_seqlens_q"]), np.asarray(kw["cu_seqlens_k"])
    ins = (host(as_cupy(x)) for x in (q0, k0, v0, do))
    refs = [cupy.asarray(r) for r in reference_variants.varlen_backward(*ins, cq, ck, causal=True)]
    standard = _standard_packed(*(as_cupy(x) for x in (q0, k0, v0, do)), cq, ck, causal=True)
    for got, baseline, ref in zip(runs[0], standard, refs, strict=True):
        assert max_error(as_cupy(got), ref) <= 2 * max_error(baseline, ref) + 1e-3
    capped = []
    for _ in range(2):
        q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
        capped.append(torch.autograd.grad(attention(q, k, v, causal=True, deterministic=True, softcap=5.0, **kw),
                                          (q, k, v), do))  # fmt: skip
    for a, b in zip(*capped, strict=True):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
    q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
    o = attention(q, k, v, causal=True, deterministic=True, window=(50, 0), **kw)
    with pytest.raises(InputError, match=r"^deterministic: not with a window"):
        o.backward(do)


def test_on_a_side_stream_twice_and_guarded_against_in_place_changes():
    """The flash path on a stream of the caller's, with its graph kept for a second backward (the forward's views of
    q, k, v, o, lse reused: the same gradients, bit for bit), meets the criterion against float64; and a q changed in
    place between forward and backward is refused by PyTorch's saved-tensor check, not silently used."""
    from gpu.autograd import attention
    from gpu.dlpack import as_cupy
    from gpu.reference import attention_backward_ref

    g = torch.Generator(device="cuda").manual_seed(3)
    q0, k0, v0, do = (torch.randn(2, 3, 300, 128, device="cuda", generator=g).half() for _ in range(4))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        q, k, v = (x.clone().requires_grad_() for x in (q0, k0, v0))
        o = attention(q, k, v, causal=True)
        first = torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        second = torch.autograd.grad(o, (q, k, v), do)
        std = torch.autograd.grad(attention(q, k, v, causal=True, impl="standard"), (q, k, v), do)
    torch.cuda.current_stream().wait_stream(side)
    refs = attention_backward_ref(*(as_cupy(x) for x in (q0, k0, v0, do)), causal=True)
    for a, b, baseline, ref in zip(first, second, std, refs, strict=True):
        assert torch.equal(a.view(torch.int16), b.view(torch.int16))
        assert max_error(as_cupy(a), ref) <= 2 * max_error(as_cupy(baseline), ref) + 1e-3
    y = q0.clone().requires_grad_() * 1  # contiguous: the forward saves it as it is
    o = attention(y, k0, v0)
    with torch.no_grad():
        y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        o.backward(do)


def test_a_step_leaves_no_cycle():
    """With Python's garbage collector off, a forward + backward frees all it allocated once the caller drops o and
    the gradients: reference counting alone frees o (no cycle through the node's saved views holds it, run 40-tax2)."""
    import gc
    import weakref

    from gpu.autograd import attention

    g = torch.Generator(device="cuda").manual_seed(4)
    q, k, v, do = (torch.randn(2, 4, 512, 64, device="cuda", generator=g).half() for _ in range(4))
    q.requires_grad_()
    attention(q, k, v).backward(do)  # kernels built, caches filled
    q.grad = None
    torch.cuda.synchronize()
    gc.collect()
    gc.disable()
    try:
        before = torch.cuda.memory_allocated()
        o = attention(q, k, v)
        o.backward(do)
        node, out = weakref.ref(o.grad_fn), weakref.ref(o)
        del o
        q.grad = None
        assert out() is None and node() is None
        assert torch.cuda.memory_allocated() == before
    finally:
        gc.enable()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_cupy_view_shares_the_tensors_memory(dtype):
    from gpu.dlpack import cupy_view

    t = torch.arange(24, device="cuda", dtype=getattr(torch, dtype)).reshape(2, 3, 4)
    view = cupy_view(t)
    assert view.shape == (2, 3, 4) and view.data.ptr == t.data_ptr()
    view[1, 2, 3] = -5  # written through CuPy, read back through torch: one memory
    assert float(t[1, 2, 3]) == -5.0 and float(t[0, 1, 2]) == 6.0


def test_training_demo_gives_one_loss_curve():
    """Same weights, same batches: the two runs differ only by the attention's fp16/bf16 rounding. At step 1 the
    losses (≈ ln 256 = 5.5) agree to ~1e-3; over 40 steps the gap may grow, but stays far below the drop in loss
    (> 1.0) that learning brings, which a wrong gradient would not."""
    from gpu.lab.train import TrainConfig, train

    report = train(TrainConfig(steps=40, batch=8, seq=128, layers=1, dtype="bfloat16"))
    flash, standard = report["losses"]["flash"], report["losses"]["standard"]
    assert abs(flash[0] - standard[0]) < 1e-2
    assert flash[0] - flash[-1] > 1.0 and standard[0] - standard[-1] > 1.0
    assert report["max_loss_gap"] < 0.1
    assert report["tokens_per_s"]["flash"] > 0 and report["tokens_per_s"]["standard"] > 0
    sdpa = report["losses"]["sdpa"]  # PyTorch's default SDPA, the third run: the same curve again
    assert abs(sdpa[0] - flash[0]) < 1e-2 and max(abs(a - b) for a, b in zip(sdpa, flash, strict=True)) < 0.1
