"""CUDA graphs captured from the public calls replay the right answers after the caches and CuPy's pool have moved
on, and beside eager calls of their shape on another stream (gpu.captured). A graph keeps the raw addresses its
launches were given: a call captured with arrays that a cache later evicts has them back in the pool while the graph
still reads and writes them, and one that shares a shape's tickets with eager calls races with them.

Each graph is captured as a serving loop captures one (an eager call of its shape first, on the capture stream),
for more shapes than the eager caches keep a stream (Flash-Decoding's WORKSPACES = 8 batch sizes and more; rung 6's
ticketed walk at d 128, N > 2048; rung 7's backward, whose work arrays the call allocates); then eager calls of
hundreds of other shapes evict every plan the captures' shapes had and take the pool's memory, their outputs kept
(checksummed). Every graph is replayed, each output held to the float64 reference (gpu/reference.py) by the
project's criterion (gpu.lab.checks: 2·max|standard − ref| + 1e-3), and the kept outputs must be as they were."""

import time

import pytest

import gpu
from gpu.lab.checks import max_error, random_like, random_qkv

pytestmark = pytest.mark.gpu

DECODE_BATCHES = range(1, 13)  # 12 graphs: more than decode_launch.WORKSPACES (8) shapes on one stream
SPLITS = 24  # more than a cluster takes (16): the partials go through the workspace (spread or ticket merge)
FORWARDS = [(2304, True), (3072, False), (4096, True)]  # rung 6 ticketed: d 128, N > 2048 (geometry.tickets)
CHURN = 300  # eager shapes after the captures: past every plan cache (lru 256, 256 keys, 64 decode keys)


def bound(o_standard, ref) -> float:
    """The project's criterion: 2·max|o_standard − ref| + 1e-3."""
    return 2 * max_error(o_standard, ref) + 1e-3


def decode_case(cupy, batch: int):
    """q (B, 8, 1, 128) against k, v (B, 2, 1000 + 8·B, 128) fp16, GQA 4, and its float64 reference and bound."""
    q = random_qkv(batch, 8, 1, 1, 128, "float16", seed=batch)[0]
    _, k, v = random_qkv(batch, 2, 1, 1000 + 8 * batch, 128, "float16", seed=100 + batch)
    k8, v8 = (cupy.repeat(x, 4, axis=1) for x in (k, v))  # each K/V head for its 4 query heads
    ref = gpu.attention_ref(q, k8, v8)[0]
    return (q, k, v), ref, bound(gpu.standard_attention(q, k8, v8), ref)


def capture(stream, fn):
    """(graph, fn()'s output in the graph): fn called once eagerly on `stream`, then captured there."""
    with stream:
        fn()
        stream.synchronize()
        stream.begin_capture()
        try:
            out = fn()
        finally:
            graph = stream.end_capture()
    return graph, out


def churn(stream) -> list:
    """Eager forward and decode calls of CHURN shapes each on `stream` (every one a plan, a key and a workspace of
    its own), their outputs kept: what a replay must not write into."""
    kept = []
    q64, k64, v64 = random_qkv(1, 1, 64 + CHURN, 64 + CHURN, 64, "float16", seed=7)
    qd = random_qkv(1, 8, 1, 1, 128, "float16", seed=8)[0]
    _, kd, vd = random_qkv(1, 1, 1, 64 + CHURN, 128, "float16", seed=9)
    with stream:
        for i in range(CHURN):
            n = 64 + i
            kept += gpu.flash_attention(q64[:, :, :n], k64[:, :, :n], v64[:, :, :n], return_lse=True)
            kept.append(gpu.decode(qd, kd[:, :, : n + 1], vd[:, :, : n + 1], splits=2))
    finish(stream, "the eager calls")
    return kept


def finish(stream, what: str, seconds: float = 10.0) -> None:
    """Wait for `stream`, failing (not hanging) where its work does not finish in `seconds`: a kernel that waits on a
    counter someone else's data overwrote never finishes."""
    until = time.monotonic() + seconds
    while not stream.done:
        assert time.monotonic() < until, f"{what} did not finish in {seconds} s"
        time.sleep(0.001)


def checksums(cupy, arrays) -> list:
    return [float(cupy.abs(x.astype(cupy.float64)).sum()) for x in arrays]


def test_graphs_replay_right_after_their_shapes_plans_are_evicted_and_the_pool_reused():
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    graphs, inputs = [], []  # (name, graph, output, reference, bound); the inputs, the caller's to keep as the outputs
    for batch in DECODE_BATCHES:
        (q, k, v), ref, tol = decode_case(cupy, batch)
        inputs.append((q, k, v))
        graph, o = capture(stream, lambda q=q, k=k, v=v: gpu.decode(q, k, v, splits=SPLITS))
        graphs.append((f"decode B {batch}", graph, o, ref, tol))
    for n, causal in FORWARDS:
        q, k, v = random_qkv(1, 4, n, n, 128, "float16", seed=n)
        inputs.append((q, k, v))
        ref = gpu.attention_ref(q, k, v, causal=causal)[0]
        tol = bound(gpu.standard_attention(q, k, v, causal=causal), ref)
        graph, o = capture(stream, lambda q=q, k=k, v=v, c=causal: gpu.flash_attention(q, k, v, causal=c))
        graphs.append((f"forward N {n} causal {causal}", graph, o, ref, tol))
    q, k, v = random_qkv(1, 4, 1024, 1024, 64, "float16", seed=3)  # rung 7's backward, d 64, causal
    o, lse = gpu.flash_attention(q, k, v, causal=True, return_lse=True)
    do = random_like(q, 4)
    refs = gpu.attention_backward_ref(q, k, v, do, causal=True)
    probs = gpu.standard_attention(q, k, v, causal=True, return_probs=True)[1]
    standard = gpu.standard_attention_backward(q, k, v, probs, do)
    graph, grads = capture(stream, lambda: gpu.flash_attention_backward(q, k, v, o, lse, do, causal=True))
    for name, g, ref, std in zip(("dq", "dk", "dv"), grads, refs, standard, strict=True):
        graphs.append((f"backward {name}", graph, g, ref, bound(std, ref)))

    kept = churn(stream)
    before = checksums(cupy, kept)
    for _, graph, *_ in graphs:
        graph.launch(stream)
    finish(stream, "the replays")
    errors = [(name, max_error(o, ref), tol) for name, _, o, ref, tol in graphs]
    assert all(e <= tol for _, e, tol in errors), "; ".join(f"{n}: {e:.2e} > {t:.2e}" for n, e, t in errors if e > t)
    assert checksums(cupy, kept) == before  # no replay wrote into the eager calls' outputs


def test_a_forward_graph_replayed_on_another_stream_beside_eager_calls_of_its_shape():
    """Rung 6's ticketed forward (d 128, N 4096): the graph captured on stream A replayed on stream B while eager
    calls of its shape run on A, each round's outputs both held to float64. Main's launchers (45f584a, which shared
    the tickets) passed it too on an H200 (gpu/NOTES.md run 44-graphs16): the eager kernel's blocks start as the
    graph's leave, and 10 rounds never interleaved their tickets; tests/test_captured_plans.py holds them apart."""
    import cupy

    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    cases = [random_qkv(2, 8, 4096, 4096, 128, "float16", seed=s) for s in (1, 2)]
    refs = [gpu.attention_ref(*c, causal=True)[0] for c in cases]
    tols = [bound(gpu.standard_attention(*c, causal=True), r) for c, r in zip(cases, refs, strict=True)]
    graph, o_graph = capture(a, lambda: gpu.flash_attention(*cases[0], causal=True))
    for _ in range(10):
        with b:
            graph.launch(b)
        with a:
            o_eager = gpu.flash_attention(*cases[1], causal=True)
        finish(a, "the eager call")
        finish(b, "the replay")
        assert max_error(o_graph, refs[0]) <= tols[0] and max_error(o_eager, refs[1]) <= tols[1]


def test_a_torch_graph_of_the_autograd_forward_replayed_beside_eager_calls_of_its_shape():
    """gpu.autograd.attention captured by torch.cuda.graph (its global capture mode: the plan made for the capture
    allocates with this thread's mode relaxed), replayed on a side stream while eager calls of its shape run on
    PyTorch's default stream: rung 6's ticketed forward, d 128, N 4096, causal."""
    torch = pytest.importorskip("torch")
    import cupy

    cases = [random_qkv(2, 8, 4096, 4096, 128, "float16", seed=s) for s in (5, 6)]
    refs = [gpu.attention_ref(*c, causal=True)[0] for c in cases]
    tols = [bound(gpu.standard_attention(*c, causal=True), r) for c, r in zip(cases, refs, strict=True)]
    torch.cuda.synchronize()
    (q, k, v), (q2, k2, v2) = ([torch.from_dlpack(x) for x in c] for c in cases)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gpu.autograd.attention(q, k, v, causal=True)  # the warm-up PyTorch's documentation asks for
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o_graph = gpu.autograd.attention(q, k, v, causal=True)
    for _ in range(5):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            graph.replay()
        o_eager = gpu.autograd.attention(q2, k2, v2, causal=True)
        torch.cuda.synchronize()
        outs = (cupy.from_dlpack(o_graph), cupy.from_dlpack(o_eager))
        assert all(max_error(o, r) <= t for o, r, t in zip(outs, refs, tols, strict=True))
