"""Every gpu/kernels/*.cu compiles with `nvcc -ptx` for sm_80 and sm_90, with the #defines its launcher injects."""

import shutil
import subprocess
from pathlib import Path

import pytest

from gpu import source, tiling

NVCC = shutil.which("nvcc") or next(
    (p for p in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc") if Path(p).exists()), None
)

# (kernel, d, dtype, tiles): the default tilings at the head dims that exercise padding, plus one of each other kind
CASES = [
    ("v1", 64, "float32", None),
    ("v1", 59, "bfloat16", None),
    ("v2", 64, "float16", None),
    ("v2", 128, "bfloat16", None),
    ("v2", 40, "bfloat16", None),
    ("v2", 128, "float16", tiling.v2_tiles(warps=8, m_tiles=1, block_cols=64, q_in_regs=True)),
    ("v2", 64, "bfloat16", tiling.with_defaults("v2", 64, swizzle=True)),
    ("softmax", 64, "float16", None),
    ("softmax", 64, "bfloat16", None),
]


def test_every_kernel_file_is_covered():
    files = {p.name for p in source.KERNEL_DIR.glob("*.cu")}
    assert files == {tiling.KERNEL_FILES[kernel] for kernel, *_ in CASES}


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed (CUDA toolkit)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    "kernel,d,dtype,tiles", CASES, ids=[f"{c[0]}-d{c[1]}-{c[2]}-{'custom' if c[3] else 'default'}" for c in CASES]
)
def test_kernel_compiles(tmp_path, arch, kernel, d, dtype, tiles):
    cu = tmp_path / tiling.KERNEL_FILES[kernel]
    cu.write_text(source.render(kernel, tiling.defines(kernel, d, dtype, tiles)))
    run = subprocess.run(
        [NVCC, "-ptx", f"-arch={arch}", "-o", str(tmp_path / "out.ptx"), str(cu)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert tiling.KERNEL_FUNCTIONS[kernel] in (tmp_path / "out.ptx").read_text()
