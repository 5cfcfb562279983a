"""Rung 7's EDGE_SPLIT (run 38-edge5): line 11 as two straight bodies, masked on edge tiles and unmasked on inner
tiles, instead of a test of `edge` per element. On the CPU: gpu.lab.backward_builds injects it into rung 7; every
build the launcher makes compiles with it without a ptxas spill; in the SASS (where nvdisasm is) the exponentials'
piece keeps no branch per element, and an inner tile's path through it is shorter than the default build's."""

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
# what gpu.backward.launch adds: DETERMINISTIC (0 or 1), or a variant's #defines (GQA and the window: the same build;
# DETERMINISTIC is refused with a window, 0 with GQA alone)
KINDS = {
    "plain": {"DETERMINISTIC": 0},
    "deterministic": {"DETERMINISTIC": 1},
    "gqa-window": Variant(group=2, window=(64, 0)).defines() | {"DETERMINISTIC": 0},
}


def _id(tiling) -> str:
    d, tiles = tiling
    return f"d{d}-{tiles.describe().replace(' ', '_') if tiles else 'default'}"


def build(tmp_path, d, tiles, kind, edge_split, dtype="float16") -> str:
    """The source of one rung 7 build as the launcher renders it, EDGE_SPLIT added."""
    cu = tmp_path / f"{kind}-{edge_split}-{SPEC.file}"
    cu.write_text(source.render(SPEC.file, SPEC.defines(d, dtype, tiles) | KINDS[kind] | {"EDGE_SPLIT": edge_split}))
    return str(cu)


def test_backward_builds_injects_edge_split_into_rung_7(monkeypatch):
    name, defines = backward_builds.parse_build("split:EDGE_SPLIT=1")
    assert (name, defines) == ("split", {"EDGE_SPLIT": 1})
    seen = []
    monkeypatch.setattr(backward_builds, "_function", lambda spec, defs, smem=0: seen.append((spec.file, defs)))
    monkeypatch.setattr(backward_builds, "_injected", {})
    monkeypatch.setattr(backward_builds, "_tiled", {})
    backward_builds.use(defines)
    launched = SPEC.defines(64, "float16", None) | {"DETERMINISTIC": 0}
    backward_builds._with_injected(SPEC, launched)
    rung5 = registry.LADDER[5]
    backward_builds._with_injected(rung5, rung5.defines(64, "float16", None))
    # only rung 7 and the passes take the injected #defines
    assert seen == [(SPEC.file, launched | {"EDGE_SPLIT": 1}), (rung5.file, rung5.defines(64, "float16", None))]
    assert backward_builds._tiled == {}  # no Tiles field changed
    # the rendered source defines it before the kernel's default
    text = source.render(SPEC.file, seen[0][1])
    assert text.index("#define EDGE_SPLIT 1") < text.index("#ifndef EDGE_SPLIT")


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("tiling", TILINGS, ids=_id)
def test_edge_split_builds_do_not_spill(tmp_path, tiling, kind):
    d, tiles = tiling
    for dtype in SPEC.dtypes:
        run = subprocess.run([NVCC, "-cubin", f"-arch={SPEC.arch}", "--resource-usage", "-o",
                              str(tmp_path / "out.cubin"), build(tmp_path, d, tiles, kind, 1, dtype)],
                             capture_output=True, text=True, check=False)  # fmt: skip
        assert run.returncode == 0, run.stderr
        assert "0 bytes spill stores, 0 bytes spill loads" in run.stdout + run.stderr, (dtype, run.stdout)


def _exp_paths(tmp_path, d, kind, edge_split):
    """The exponentials' piece of a build's consumer loop: its conditional branches, its ex2 instructions, and the
    (instructions, taken branches) of the two ways through it: every forward branch falling through, every one
    taken (gpu.lab.rung7_instructions.walk)."""
    cubin = tmp_path / f"{kind}-{edge_split}.cubin"
    subprocess.run([NVCC, "-cubin", f"-arch={SPEC.arch}", "-o", str(cubin), build(tmp_path, d, None, kind, edge_split)],
                   check=True)  # fmt: skip
    sass = subprocess.run([ri.nvdisasm(), "-c", str(cubin)], check=True, capture_output=True, text=True).stdout
    code, labels = ri.parse(sass)
    ((begin, end),) = ri.pieces(code, labels)["exp"]
    piece = code[begin:end]
    conditional = sum(op.startswith("BRA") and predicated for op, predicated, _ in piece)
    ex2 = sum(op == "MUFU.EX2" for op, _, _ in piece)
    return conditional, ex2, {ri.walk(code, labels, begin, end, take) for take in (False, True)}


@pytest.mark.skipif(NVCC is None or ri.nvdisasm() is None, reason="needs nvcc and nvdisasm")
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("d", SPEC.head_dims)
def test_edge_split_inner_body_has_no_branch_per_element(tmp_path, d, kind):
    elements = SPEC.tiles(d).block_rows // 2  # of P_ijᵀ per lane: 64 keys × Br queries over 128 threads
    # the default build: one body, a conditional branch per element (the window's build one more, its fully_seen);
    # an inner tile takes every one of them (model7's BRANCHES), an edge tile none
    conditional, ex2, paths = _exp_paths(tmp_path, d, kind, 0)
    assert ex2 == elements and elements <= conditional <= elements + 1
    (inner0, taken0), (_, edge_taken0) = sorted(paths)
    assert taken0 >= elements and edge_taken0 == 0
    # EDGE_SPLIT: two bodies, the test of `edge` once a tile (ptxas: at most two branches, its short-circuit terms);
    # each way through takes at most one branch (the jump over the other body), and the shorter, an inner tile's,
    # issues fewer instructions than the default's inner path
    conditional, ex2, paths = _exp_paths(tmp_path, d, kind, 1)
    assert ex2 == 2 * elements and conditional <= 2
    (inner1, taken1), (edge1, edge_taken1) = sorted(paths)
    assert taken1 <= 1 and edge_taken1 <= 1
    assert inner1 < inner0 < edge1
