"""Rung 7's line 11 as two straight bodies, masked on edge tiles and unmasked on inner tiles (run 38-edge5, the
default since run 39), instead of a test of `edge` per element. On the CPU: gpu.lab.backward_builds injects lab
#defines into rung 7 only; every build the launcher makes compiles without a ptxas spill; in the SASS (where nvdisasm
is) the exponentials' piece keeps no branch per element, and an inner tile's path through it is the shorter."""

import subprocess

import pytest

from gpu import registry, source
from gpu.lab import backward_builds
from gpu.lab import rung7_instructions as ri
from gpu.lab.harness import TUNE
from gpu.variants import Variant
from tests.test_kernels_compile import NVCC

SPEC = registry.LADDER[7]
TILINGS = [(d, None) for d in SPEC.head_dims] + [
    (d, tiles) for (direction, d), entries in TUNE.items() for rung, tiles in entries
    if direction == "backward" and rung == 7 and tiles is not None
]  # fmt: skip
# what gpu.backward.launch adds: DETERMINISTIC (0 or 1) and FUSED_DQ (1: the plain builds round dQ themselves from
# gpu.backward.FUSED_PLANES query planes on), or a variant's #defines (GQA and the window: the same build;
# DETERMINISTIC is refused with a window, 0 with GQA alone)
KINDS = {
    "plain": {"DETERMINISTIC": 0, "FUSED_DQ": 0},
    "plain-fused": {"DETERMINISTIC": 0, "FUSED_DQ": 1},
    "deterministic": {"DETERMINISTIC": 1, "FUSED_DQ": 0},
    "deterministic-fused": {"DETERMINISTIC": 1, "FUSED_DQ": 1},
    "gqa-window": Variant(group=2, window=(64, 0)).defines() | {"DETERMINISTIC": 0, "FUSED_DQ": 0},
}


def _id(tiling) -> str:
    d, tiles = tiling
    return f"d{d}-{tiles.describe().replace(' ', '_') if tiles else 'default'}"


def build(tmp_path, d, tiles, kind, dtype="float16") -> str:
    """The source of one rung 7 build as the launcher renders it."""
    cu = tmp_path / f"{kind}-{SPEC.file}"
    cu.write_text(source.render(SPEC.file, SPEC.defines(d, dtype, tiles) | KINDS[kind]))
    return str(cu)


def test_backward_builds_injects_defines_into_rung_7_only(monkeypatch):
    name, defines = backward_builds.parse_build("atomics:DQ_TMA=0")
    assert (name, defines) == ("atomics", {"DQ_TMA": 0})
    seen = []
    monkeypatch.setattr(backward_builds, "_function", lambda spec, defs, smem=0: seen.append((spec.file, defs)))
    monkeypatch.setattr(backward_builds, "_injected", {})
    monkeypatch.setattr(backward_builds, "_tiled", {})
    backward_builds.use(defines)
    launched = SPEC.defines(64, "float16", None) | {"DETERMINISTIC": 0}
    assert launched["DQ_TMA"] == 1
    backward_builds._with_injected(SPEC, launched)
    rung5 = registry.LADDER[5]
    backward_builds._with_injected(rung5, rung5.defines(64, "float16", None))
    # only rung 7 and the passes take the injected #defines, over the launcher's own
    assert seen == [(SPEC.file, launched | {"DQ_TMA": 0}), (rung5.file, rung5.defines(64, "float16", None))]
    assert backward_builds._tiled == {}  # no Tiles field changed
    assert "#define DQ_TMA 0" in source.render(SPEC.file, seen[0][1])


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("tiling", TILINGS, ids=_id)
def test_rung_7_builds_do_not_spill(tmp_path, tiling, kind):
    d, tiles = tiling
    for dtype in SPEC.dtypes:
        run = subprocess.run([NVCC, "-cubin", f"-arch={SPEC.arch}", "--resource-usage", "-o",
                              str(tmp_path / "out.cubin"), build(tmp_path, d, tiles, kind, dtype)],
                             capture_output=True, text=True, check=False)  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert "0 bytes spill stores, 0 bytes spill loads" in run.stdout + run.stderr, (dtype, run.stdout)


def _exp_paths(tmp_path, d, kind):
    """The exponentials' piece of a build's consumer loop: its conditional branches, its ex2 instructions, and the
    (instructions, taken branches) of the two ways through it: every forward branch falling through (an inner
    tile), every one taken (an edge tile; gpu.lab.rung7_instructions.walk)."""
    cubin = tmp_path / f"{kind}.cubin"
    subprocess.run([NVCC, "-cubin", f"-arch={SPEC.arch}", "-o", str(cubin), build(tmp_path, d, None, kind)],
                   check=True)  # fmt: skip
    sass = subprocess.run([ri.nvdisasm(), "-c", str(cubin)], check=True, capture_output=True, text=True).stdout
    code, labels = ri.parse(sass)
    ((begin, end),) = ri.pieces(code, labels)["exp"]
    piece = code[begin:end]
    conditional = sum(op.startswith("BRA") and predicated for op, predicated, _ in piece)
    ex2 = sum(op == "MUFU.EX2" for op, _, _ in piece)
    return conditional, ex2, [ri.walk(code, labels, begin, end, take) for take in (False, True)]


@pytest.mark.skipif(NVCC is None or ri.nvdisasm() is None, reason="needs nvcc and nvdisasm")
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("d", SPEC.head_dims)
def test_line_11_has_no_branch_per_element(tmp_path, d, kind):
    elements = SPEC.tiles(d).block_rows // 2  # of P_ijᵀ per lane: 64 keys × Br queries over 128 threads
    # two bodies, each with every element's exponential; the test of `edge` once a tile (ptxas: at most two
    # branches, its short-circuit terms), not one per element as the one body had (run 38-model7: 64 at d = 64)
    conditional, ex2, ((inner, inner_taken), (edge, edge_taken)) = _exp_paths(tmp_path, d, kind)
    assert ex2 == 2 * elements and conditional <= 2
    # each way through takes at most one branch (the inner tile's: the jump over the masked body), and the inner
    # tile's issues fewer instructions than the edge tile's masked body, yet at least one per exponential
    assert inner_taken <= 1 and edge_taken <= 2
    assert elements < inner < edge
