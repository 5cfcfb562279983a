"""The forward's variants on rungs 3 and 6 (GQA, window, ALiBi, softcap, packed batches, and their combinations) against
float64 from the definition (sim.api.reference_variants) by FlashAttention's criterion (gpu.lab.variant_checks):
ragged N, N ≠ Nk both ways, causal and not, fp16 and bf16, a padded head dim on rung 3. The argument checks run
on the CPU (hypothesis); the rest needs a GPU (rung 6: an sm_90 one)."""

import dataclasses
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu import registry, source, variants
from gpu.inputs import Problem
from gpu.lab.variant_checks import CASES, PACKED
from sim.core.errors import InputError

# (rung, d, dtype): rung 6 at its head dims; rung 3 also at d = 72, rows padded to 80 for the MMA
SETUPS = [(6, 128, "float16"), (6, 64, "bfloat16"), (3, 64, "float16"), (3, 72, "bfloat16")]
SHAPES = [(2, 4, 200, 333), (1, 4, 333, 200)]  # (batch, heads, N, Nk): N < Nk, and N > Nk (causal rows see no key)


def _gpu(rung):
    pytest.importorskip("cupy")
    from gpu import device

    if not device.available()[0]:
        pytest.skip("no GPU")
    if rung == 6 and device.capability() != "9.0":
        pytest.skip(f"rung 6 runs on compute capability 9.0 only; this GPU is {device.capability()}")


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("case", [*CASES, *PACKED])
@pytest.mark.parametrize("setup", SETUPS, ids=lambda s: f"rung{s[0]}-d{s[1]}-{s[2]}")
def test_variant(setup, case, shape, causal):
    rung, d, dtype = setup
    _gpu(rung)
    from gpu.lab.variant_checks import check, make_inputs

    if case in PACKED and shape != SHAPES[0]:
        pytest.skip("a packed batch has its own lengths")
    q, k, v, kw = make_inputs(*shape[:2], *shape[2:], d, dtype, CASES.get(case) or PACKED[case], seed=len(case))
    c = check(q, k, v, causal=causal, kernel=rung, **kw)
    assert c.ok, c.describe()


@pytest.mark.gpu
@pytest.mark.parametrize("rung", [6, 3])
@pytest.mark.parametrize("window", [(256, 0), (300, 700), (1000, -1)])
def test_window_skips_blocks_over_many(rung, window):
    """A band that starts past block 0 and ends before the last, over more K/V blocks than rung 6 has stages."""
    _gpu(rung)
    from gpu.lab.variant_checks import check, make_inputs

    q, k, v, kw = make_inputs(1, 2, 2100, 2300, 128, "float16", {"window": list(window), "kv_heads": 1}, seed=3)
    for causal in (False, True):
        c = check(q, k, v, causal=causal, kernel=rung, **kw)
        assert c.ok, (causal, c.describe())


@pytest.mark.gpu
@pytest.mark.parametrize("variant", [{"kv_heads": 4}, {"kv_heads": 4, "window": [300, 0]}], ids=["gqa", "gqa-window"])
@pytest.mark.parametrize("setup", [(64, "bfloat16"), (128, "float16")], ids=lambda s: f"d{s[0]}-{s[1]}")
def test_packed_walk_over_many_units(setup, variant):
    """Rung 6's persistent walk over a packed batch with more units than an H100 has SMs (16 heads, ≥ 336 units), so
    that each thread block walks several, of different sequences: ragged lengths, one of a single row, N ≠ Nk."""
    _gpu(6)
    from gpu.lab.variant_checks import check, make_inputs

    lengths = {"seqlens_q": [700, 1, 1500, 333, 1024, 64, 900], "seqlens_k": [700, 5, 1400, 400, 1024, 64, 1000]}
    q, k, v, kw = make_inputs(0, 16, 0, 0, setup[0], setup[1], variant | lengths, seed=7)
    for causal in (False, True):
        c = check(q, k, v, causal=causal, kernel=6, **kw)
        assert c.ok, (causal, c.describe())


@pytest.mark.gpu
def test_slopes_per_sequence_and_on_the_device():
    """ALiBi slopes (B, Hq), given as a CuPy array, each batch entry its own."""
    _gpu(3)
    import cupy

    from gpu.lab.variant_checks import check, make_inputs

    q, k, v, _ = make_inputs(2, 4, 150, 150, 64, "float16", {}, seed=5)
    slopes = cupy.asarray(np.array([[0.5, 0.25, 0.125, 0.0625], [1.0, 0.0, -0.1, 0.3]]))
    assert check(q, k, v, causal=True, alibi_slopes=slopes).ok


@pytest.mark.gpu
def test_bad_variant_arguments_get_one_line():
    _gpu(3)
    import gpu
    from gpu.lab.variant_checks import make_inputs

    q, k, v, _ = make_inputs(1, 6, 64, 64, 64, "float16", {"kv_heads": 4})
    with pytest.raises(InputError, match="4 heads must divide q's 6"):
        gpu.flash_attention(q, k, v)
    q, k, v, _ = make_inputs(1, 4, 64, 64, 64, "float16", {})
    calls = {
        "kernel: rung 2 takes no variant": dict(kernel=2, window=(8, 0)),
        "window: must be a pair": dict(window=8),
        "softcap: must be finite": dict(softcap=float("inf")),
        "alibi_slopes: shape": dict(alibi_slopes=[1.0, 2.0]),
        "max_seqlen_q, max_seqlen_k: only for a packed": dict(max_seqlen_q=64),
        "a packed batch takes a CuPy array shaped": dict(cu_seqlens_q=[0, 64], cu_seqlens_k=[0, 64]),
    }
    for match, kw in calls.items():
        with pytest.raises(InputError, match=match) as e:
            gpu.flash_attention(q, k, v, **kw)
        assert "\n" not in str(e.value)
    q, k, v, kw = make_inputs(0, 4, 0, 0, 64, "float16", {"seqlens_q": [3, 5], "seqlens_k": [4, 4]})
    for bad, match in (
        ([0, 3, 7], "must start at 0, increase strictly and end"),
        ([0, 8], "cu_seqlens_k: 2 sequences, but cu_seqlens_q has 1"),
    ):
        with pytest.raises(InputError, match=match):
            gpu.flash_attention(q, k, v, cu_seqlens_q=bad, cu_seqlens_k=kw["cu_seqlens_k"])
    with pytest.raises(InputError, match="max_seqlen_q: must be an integer from the longest sequence"):
        gpu.flash_attention(q, k, v, **kw, max_seqlen_q=2)


@pytest.mark.gpu
def test_autograd_takes_the_variants():
    _gpu(3)
    torch = pytest.importorskip("torch")
    import gpu
    from gpu.autograd import attention
    from gpu.lab.variant_checks import make_inputs

    q, k, v, _ = make_inputs(1, 4, 100, 100, 64, "float16", {"kv_heads": 2})
    tq, tk, tv = (torch.from_dlpack(x) for x in (q, k, v))
    with torch.no_grad():
        o = attention(tq, tk, tv, causal=True, window=(20, 0), softcap=3.0)
    direct = gpu.flash_attention(q, k, v, causal=True, window=(20, 0), softcap=3.0)  # judged by test_variant
    assert torch.equal(o, torch.from_dlpack(direct))
    with pytest.raises(InputError, match=r"window, gqa .*: impl 'standard' takes none"):
        attention(tq, tk, tv, window=(20, 0), impl="standard")  # gradients: tests/test_gpu_backward_variants.py


# -- the checks alone, on the CPU ---------------------------------------------------------------------------------


@pytest.mark.parametrize("blocks", [132, 1000])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("br", [128, 192])
def test_packed_units_cover_each_tile_once(br, causal, blocks):
    """The persistent packed walk's units (gpu.flash.packed_units): every tile of every (sequence, head) once, each
    sequence by its own Tr = ⌈n_b / Br⌉, causal in pairs (Tr − 1 − q, q); dealt in rounds of one unit a thread
    block, the busiest block within 3% of the mean for 2×-spread lengths (a walk in sequence order: 10%)."""
    from gpu.flash import packed_units

    seqlens, heads = ((1, 130, 500, 192, 193, 4096), (7, 130, 400, 192, 300, 4096)), 3
    units = packed_units(seqlens, heads, br, 128, causal, blocks)
    assert units.dtype == np.int32 and units.shape[1] == 4 and len(units) % min(blocks, len(units)) == 0
    real = units[units[:, 0] >= 0]
    assert (real[:, 3] == 0).all() and (units[units[:, 0] < 0] == -1).all()
    seen = [(int(p), int(i)) for p, *tiles in real[:, :3] for i in tiles if i >= 0]
    lengths = seqlens[0]
    expected = [(b * heads + h, i) for b, n in enumerate(lengths) for h in range(heads) for i in range(-(-n // br))]
    assert sorted(seen) == sorted(expected)
    for p, first, second in real[:, :3]:
        tr = -(-lengths[p // heads] // br)
        assert second == (tr - 1 - first if causal and first != tr - 1 - first else -1)
    if len(real) <= blocks:  # one unit a thread block: the list in sequence and head order
        assert len(units) == len(real) and list(units[:, 0]) == sorted(units[:, 0])
    lengths = [4096, 4053, 2180, 3302, 3136]  # drawn from [N/2, N] at N = 4096 (run 45's bench batch, d = 64)
    units = packed_units((tuple(lengths),) * 2, 32, 192, 128, True, 132)
    kv = lambda b, i: min(-(-lengths[b] // 128), (min((i + 1) * 192, lengths[b]) - 1) // 128 + 1) + 1  # noqa: E731
    work = [sum(kv(p // 32, i) for i in (f, s) if i >= 0) if p >= 0 else 0 for p, f, s, _ in units]
    per_block = np.bincount(np.arange(len(units)) % 132, work)
    assert per_block.max() <= 1.03 * per_block.mean()


def test_a_plain_call_adds_no_define_and_no_argument():
    plain = variants.Variant()
    p = Problem(1, 4, 64, 64, 64, "float16", True, 0.125)
    assert plain.plain and plain.defines() == {} and plain.args(p) == ()


@pytest.mark.parametrize(
    "window,causal,sides",
    [(None, False, None), ((5, 0), False, (5, 0)), ((5, 9), True, (5, 0)), ((-1, -1), True, (None, 0)),
     ((None, 3), False, (None, 3)), ((7, -1), False, (7, None))],
)  # fmt: skip
def test_causal_folds_into_the_window(window, causal, sides):
    """The kernel's (left, right): causal is right ≤ 0, an unbounded side is 2^30 (variants.cuh's UNBOUNDED)."""
    v = variants.Variant(group=2, window=variants.check_window(window))
    p = Problem(1, 4, 64, 80, 64, "float16", causal, 0.125)
    args = v.args(p)
    assert v.defines() == {"VARIANTS": 1, "VARLEN": 0, "SOFTCAP": 0, "ALIBI": 0}
    if sides is None:
        sides = (None, 0 if causal else None)
    assert (int(args[3]), int(args[4])) == tuple(variants.UNBOUNDED if s is None else s for s in sides)
    assert int(args[6]) == 2 and int(args[7]) == 4


@given(st.one_of(st.integers(-10, 10), st.text(max_size=3), st.lists(st.integers(-3, 3), max_size=3),
                 st.tuples(st.floats(allow_nan=True), st.integers(-3, 3)), st.tuples(st.booleans(), st.integers())))  # fmt: skip
def test_hostile_windows_get_one_line(window):
    try:
        got = variants.check_window(window)
    except InputError as e:
        assert str(e).startswith("window:") and "\n" not in str(e)
    else:
        assert len(got) == 2 and all(isinstance(s, int) and -1 <= s < variants.UNBOUNDED for s in got)


@given(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5), st.text(max_size=2), st.booleans())
)
def test_hostile_softcaps_get_one_line(softcap):
    try:
        got = variants.check_softcap(softcap)
    except InputError as e:
        assert str(e).startswith("softcap:") and "\n" not in str(e)
    else:
        assert got > 0 and np.isfinite(got)


@given(st.one_of(st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=5), st.text(max_size=3),
                 st.lists(st.lists(st.floats(-2, 2), min_size=4, max_size=4), min_size=1, max_size=3)))  # fmt: skip
def test_hostile_slopes_get_one_line(slopes):
    try:
        got = variants.check_alibi(slopes, 2, 4)
    except InputError as e:
        assert str(e).startswith("alibi_slopes:") and "\n" not in str(e)
    else:
        assert got.shape == (2, 4) and np.isfinite(got).all()


@given(st.lists(st.integers(-3, 40), max_size=6), st.one_of(st.none(), st.integers(-2, 50), st.floats(0, 50)))
def test_hostile_cu_seqlens_get_one_line(cu, max_seqlen):
    try:
        checked = variants._cu_seqlens("cu_seqlens_q", cu, 30)
        longest = variants._max_seqlen("max_seqlen_q", max_seqlen, checked)
    except InputError as e:
        assert str(e).split(":")[0] in ("cu_seqlens_q", "max_seqlen_q") and "\n" not in str(e)
    else:
        assert checked[0] == 0 and checked[-1] == 30 and (np.diff(checked) > 0).all()
        assert np.diff(checked).max() <= longest <= 30


NVCC = shutil.which("nvcc") or next(
    (p for p in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc") if Path(p).exists()), None
)
BUILDS = [{"SOFTCAP": 0, "ALIBI": 0, "VARLEN": 0}, {"SOFTCAP": 1, "ALIBI": 1, "VARLEN": 0},
          {"SOFTCAP": 0, "ALIBI": 0, "VARLEN": 1}, {"SOFTCAP": 1, "ALIBI": 1, "VARLEN": 1}]  # fmt: skip


def launched(spec, d, dtype, build):
    """The #defines of a variant build as gpu.flash.launch runs it: rung 6 persistent but for softcap and ALiBi, O_i
    from registers for a packed batch."""
    scored = build["SOFTCAP"] or build["ALIBI"]
    tiles = dataclasses.replace(spec.default_tiles(d), persistent=spec.default_tiles(d).persistent and not scored)
    defines = spec.defines(d, dtype, tiles) | {"VARIANTS": 1} | build
    return defines | ({"O_TMA": 0} if build["VARLEN"] and "O_TMA" in defines else {})


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("build", BUILDS, ids=lambda b: "-".join(k for k, v in b.items() if v) or "gqa-window")
@pytest.mark.parametrize("rung,d,arch", [(6, 128, "sm_90a"), (3, 72, "sm_80")])
def test_variant_builds_compile(tmp_path, rung, d, arch, build):
    """Each variant build of rungs 3 and 6 compiles (`nvcc -ptx`), with the defines gpu/variants.py injects."""
    spec = registry.FORWARD[rung]
    cu = tmp_path / spec.file
    cu.write_text(source.render(spec.file, launched(spec, d, "bfloat16", build)))
    run = subprocess.run([NVCC, "-ptx", f"-arch={arch}", "-o", str(tmp_path / "out.ptx"), str(cu)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert spec.function in (tmp_path / "out.ptx").read_text()


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("build", BUILDS, ids=lambda b: "-".join(k for k, v in b.items() if v) or "gqa-window")
@pytest.mark.parametrize("d", [64, 128])
def test_rung_6_variant_builds_neither_spill_nor_split_stores(tmp_path, d, build):
    """ptxas reports no spill for rung 6's variant builds as they launch (run 35: ALiBi and softcap at d = 64 spilled,
    and the spill store reached L2 as writes; run 38-var3: persistent, softcap 124 bytes and ALiBi 16 at d = 64, and
    a packed walk that found its sequences from cu_q 188), and O_i leaves in st.global.v4 stores only (the packed
    build's front end had made one of them four st.global.u32, writes ×1.17–1.24 at L2): HEAD_DIM / 32 of them a
    row pair, two L_i stores; or, persistent at Br ≤ Bc (d = 128, no packed batch), by TMA but for a tile without
    keys."""
    spec = registry.FORWARD[6]
    cu = tmp_path / spec.file
    cu.write_text(source.render(spec.file, launched(spec, d, "float16", build)))
    run = subprocess.run([NVCC, "-cubin", "-arch=sm_90a", "--resource-usage", "-o", str(tmp_path / "out.cubin"),
                          str(cu)], capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in run.stdout + run.stderr
    run = subprocess.run([NVCC, "-ptx", "-arch=sm_90a", "-o", str(tmp_path / "out.ptx"), str(cu)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    ptx = (tmp_path / "out.ptx").read_text()
    stores = [line.split()[0] for line in ptx.splitlines() if "st.global" in line]
    tma_store = "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group" in ptx
    assert tma_store == bool(launched(spec, d, "float16", build).get("O_TMA"))
    # each copy of the store (the persistent walk inlines several): L_i of a lane's rows g and g + 8, and O_i's d / 32
    # pieces of 16 bytes a row
    assert stores.count("st.global.f32") % 2 == 0 and stores.count("st.global.f32") >= 2
    assert all(s == "st.global.f32" or s.startswith("st.global.v4.") for s in stores), stores
    assert sum(s.startswith("st.global.v4.") for s in stores) == stores.count("st.global.f32") * d // 32
