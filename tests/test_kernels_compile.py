"""Every gpu/kernels/*.cu compiles with `nvcc -ptx` for sm_80 and sm_90 (or for the one target it is written for:
sm_90a), its headers inlined, with the #defines its launcher injects: each registry entry at its default tiling
for head dims that exercise padding (or the head dims it takes), and every tiling the harness tunes over."""

import dataclasses
import shutil
import subprocess
from pathlib import Path

import pytest

from gpu import registry, source
from gpu.lab.harness import TUNE

NVCC = shutil.which("nvcc") or next(
    (p for p in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc") if Path(p).exists()), None
)

# (spec, d, dtype, tiles): defaults at d = 64, 128 and a padded d, in each storage dtype the kernel takes
CASES = [
    (spec, d, dtype, None)
    for spec in registry.ALL_SPECS
    for d, dtype in zip(
        spec.head_dims or (64, 128, 40 if spec.tensor_cores else 59), spec.dtypes[::-1] * 3, strict=False
    )
]
CASES += [
    (registry.forward(name) if direction == "forward" else registry.backward(name), d, "bfloat16", tiles)
    for (direction, d), variants in TUNE.items()
    for name, tiles in variants
    if tiles is not None
]


def _id(case) -> str:
    spec, d, dtype, tiles = case
    return f"{spec.direction}-{spec.name}-d{d}-{dtype}-{tiles.describe().replace(' ', '_') if tiles else 'default'}"


def test_every_kernel_file_is_covered():
    files = {p.name for p in source.KERNEL_DIR.glob("*.cu")}
    assert files == {spec.file for spec, *_ in CASES}


def test_ladder_is_numbered_as_its_files():
    for number, spec in registry.LADDER.items():
        assert spec.file.startswith(f"{number:02d}_") and spec.rung == number


def test_common_header_is_inlined():
    for spec in registry.ALL_SPECS:
        text = source.render(spec.file, spec.defines(64, spec.dtypes[-1], None))
        assert '#include "common.cuh"' not in text and "cp_async_16" in text


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_kernel_compiles(tmp_path, arch, case):
    spec, d, dtype, tiles = case
    if spec.arch and arch != "sm_90":
        pytest.skip(f"{spec.file} compiles for {spec.arch} only (checked in the sm_90 run)")
    if arch == "sm_80" and tiles is not None:
        pytest.skip("tuned tilings are checked for sm_90, the architecture they were tuned on")
    arch = spec.arch or arch
    cu = tmp_path / spec.file
    defines = spec.defines(d, dtype, tiles)
    # rung 7's launcher adds DETERMINISTIC (0 or 1, gpu.backward.launch) and FUSED_DQ (1 with TMA reduce-adds and no
    # variant: gpu.backward.fused): every build it can launch is checked
    builds = [defines]
    if spec.tma and spec.direction == "backward":
        fused = (0, 1) if defines["DQ_TMA"] else (0,)
        builds = [defines | {"DETERMINISTIC": x, "FUSED_DQ": f} for x in (0, 1) for f in fused]
    # rung 8's launcher adds SPREAD (1: the merge by a cooperative grid's blocks) or, on sm_90, CLUSTER (2 … 16), and
    # PAGE_ROWS (1: a paged cache whose pages are not whole tiles) to any of them
    if spec is registry.DECODE[8]:
        builds += [defines | {"SPREAD": 1}] + ([defines | {"CLUSTER": 16}] if arch == "sm_90" else [])
        builds += [b | {"PAGE_ROWS": 1} for b in builds]
    for build in builds:
        cu.write_text(source.render(spec.file, build))
        run = subprocess.run(
            [NVCC, "-ptx", f"-arch={arch}", "-o", str(tmp_path / "out.ptx"), str(cu)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        assert spec.function in (tmp_path / "out.ptx").read_text()


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "one-block-per-tile"])
@pytest.mark.parametrize(
    ("d", "n", "causal"), [(64, 1024, True), (64, 4096, False), (128, 1024, False), (128, 4096, True)]
)
def test_rung_6_stores_o_in_whole_16_byte_pieces(tmp_path, d, n, causal, persistent):
    """Rung 6's plain builds, at each tiling a call picks (short rows too), store O_i only with st.global.v4 (or TMA
    stores) and L_i with st.global.f32: NVVM had split one 16-byte store of O into four st.global.u32 in two of the
    persistent build's four copies of the store (half-filled 32-byte sectors; common.cuh's store_16 since run 36)."""
    spec = registry.FORWARD[6]
    tiles = dataclasses.replace(spec.tiles_for(d, n, causal), persistent=persistent)
    cu = tmp_path / spec.file
    defines = spec.defines(d, "float16", tiles)
    defines["WALK"] = int(persistent and causal)  # as flash.launch builds it: the host's walk for causal calls only
    cu.write_text(source.render(spec.file, defines))
    run = subprocess.run([NVCC, "-ptx", "-arch=sm_90a", "-o", str(tmp_path / "out.ptx"), str(cu)],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert run.returncode == 0, run.stderr
    stores = [line.split()[0] for line in (tmp_path / "out.ptx").read_text().splitlines() if "st.global" in line]
    o_stores = [s for s in stores if s != "st.global.f32"]
    assert o_stores and all(s.startswith("st.global.v4.") for s in o_stores), stores
    # each copy of the store: HEAD_DIM / 32 pieces of 16 bytes a row, and one L_i
    assert len(o_stores) == d // 32 * stores.count("st.global.f32")
    # the persistent walk stores O_i of a tile with keys by TMA, whole boxes (run 37-fwd3: at Br ≤ Bc through a K_j
    # buffer; run 39-fwd4: at d = 64 through a buffer of its own, Br = 192 too); the stores above are then those of
    # a tile without keys (zeros)
    tma_store = "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group" in (tmp_path / "out.ptx").read_text()
    assert tma_store == persistent == bool(spec.defines(d, "float16", tiles)["O_TMA"])
