"""gpu.lab.calibrate (and check_model measure) without a GPU: the command lines, and the microbenchmarks compile for
the targets they run on (`nvcc -ptx`: sm_80 and sm_90 for the portable ones, sm_90a for the TMA reduce-adds)."""

import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu
from gpu.lab import calibrate, rung7_fences, rung7_latencies
from tests.test_kernels_compile import NVCC


def _run(*args):
    return subprocess.run([sys.executable, "-m", "gpu.lab.calibrate", *args], capture_output=True, text=True)


def test_help_and_usage():
    assert _run("--help").returncode == 0 and _run("--help").stdout.strip() == calibrate.USAGE
    bad = _run()
    assert bad.returncode == 2 and bad.stderr.strip() == calibrate.USAGE


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.text(min_size=1), min_size=2, max_size=3)
    | st.just([])
    | st.text(min_size=1).filter(lambda s: s not in ("h", "-help")).map(lambda s: ["-" + s])
)
def test_wrong_arguments_get_the_usage_line_and_exit_2(args):
    with pytest.raises(SystemExit) as e:
        calibrate.main(args)
    assert e.value.code == 2


@pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine")
@pytest.mark.parametrize(
    ("code", "arch", "instruction"),
    [
        (calibrate.SOURCE, "sm_80", "atom.global.add.f32"),  # atomicAdd below sm_90
        (calibrate.SOURCE, "sm_90", "red.global.add.v2.f32"),
        (calibrate.REDUCE_SOURCE, "sm_90a", "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.bulk_group"),
    ],
)
def test_microbenchmarks_compile(tmp_path, code, arch, instruction):
    _compiles(tmp_path, code, arch, instruction)


@pytest.mark.skipif(NVCC is None, reason="no nvcc on this machine")
@pytest.mark.parametrize(("d", "br"), list(rung7_latencies.GROUP_SHAPES))
def test_rung7_group_microbenchmarks_compile_with_every_wgmma_kept(tmp_path, d, br):
    """ptxas drops a wgmma whose results are never used (the kernels sum every accumulator for that reason) and
    serializes them when their registers run short (C7511): neither may happen, or the clocks time nothing."""
    cu = tmp_path / "groups.cu"
    cu.write_text(rung7_fences.fences_source(d, br))
    out = subprocess.run([NVCC, "-cubin", "-arch=sm_90a", "-std=c++17", "-Xptxas", "-v", str(cu), "-o",
                          str(tmp_path / "groups.cubin")], capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "C7511" not in out.stderr and "serialized" not in out.stderr
    used = dict(re.findall(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", out.stderr, re.S))
    # each kernel holds its accumulators (64 · N / 128 floats per thread): far more than the 12 of a dropped wgmma
    assert all(int(used[k]) >= 32 for k in rung7_latencies.GROUP_SHAPES[(d, br)]), used
    assert int(used["fences"]) >= 32, used  # its loading warpgroup's groups kept: what loads SRAM beside the fence
    _compiles(tmp_path, rung7_latencies.groups_source(d, br), "sm_90a", "bar.arrive")


def _compiles(tmp_path, code, arch, instruction):
    cu = tmp_path / "bench.cu"
    cu.write_text(code)
    out = subprocess.run(
        [NVCC, "-ptx", f"-arch={arch}", "-std=c++17", str(cu), "-o", str(tmp_path / "bench.ptx")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    ptx = (tmp_path / "bench.ptx").read_text()
    assert instruction in ptx


@pytest.mark.skipif(gpu.available()[0], reason="a GPU is here: the commands would measure")
@pytest.mark.parametrize("module", ["gpu.lab.calibrate", "gpu.lab.check_model measure"])
def test_without_a_gpu_the_measuring_commands_say_so_in_one_line(tmp_path, module):
    out = subprocess.run([sys.executable, "-m", *module.split(), str(tmp_path / "out.json")], capture_output=True,
                         text=True)  # fmt: skip
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1
    assert "needs CuPy and an NVIDIA GPU" in out.stderr and not (tmp_path / "out.json").exists()
