"""gpu.lab.nvrtc_spills reads ptxas's verbose report as NVRTC and nvcc print it (logs copied from run 47's device
calls, trimmed), and lists each function of a build on a line."""

import contextlib
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpu.lab import nvrtc_spills

NVRTC_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'flash2_wgmma_bwd' for 'sm_90a'
ptxas info    : Function properties for flash2_wgmma_bwd
ptxas         .     8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers, 8 bytes cumulative stack size
ptxas info    : Compiling entry function 'flash2_bwd_dq' for 'sm_90a'
ptxas info    : Function properties for flash2_bwd_dq
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 18 registers, used 0 barriers
"""
NVCC_LOG = """ptxas info    : Compiling entry function 'flash2_wgmma_bwd' for 'sm_90a'
ptxas info    : Function properties for flash2_wgmma_bwd
    0 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 16 barriers
"""


def test_the_report_of_each_function_as_nvrtc_and_nvcc_print_it():
    assert nvrtc_spills.parse(NVRTC_LOG) == {
        "flash2_wgmma_bwd": {"stack": 8, "spill_stores": 8, "spill_loads": 8, "registers": 168},
        "flash2_bwd_dq": {"stack": 0, "spill_stores": 0, "spill_loads": 0, "registers": 18},
    }
    assert nvrtc_spills.parse(NVCC_LOG) == {
        "flash2_wgmma_bwd": {"stack": 0, "spill_stores": 4, "spill_loads": 12, "registers": 168}
    }


def test_a_line_a_function_with_the_build_s_defines():
    row = {"file": "07_flash2_backward_wgmma.cu", "defines": {"HEAD_DIM": 64, "BR": 128}, "arch": "sm_90a",
           "functions": nvrtc_spills.parse(NVRTC_LOG)}  # fmt: skip
    assert nvrtc_spills.describe(row) == [
        "07_flash2_backward_wgmma.cu flash2_wgmma_bwd HEAD_DIM=64 BR=128: 168 registers, stack 8, spills 8 / 8 bytes",
        "07_flash2_backward_wgmma.cu flash2_bwd_dq HEAD_DIM=64 BR=128: 18 registers, stack 0, spills 0 / 0 bytes",
    ]


@given(st.one_of(st.integers(max_value=0), st.integers(min_value=65)))
def test_a_process_count_out_of_range_is_refused_in_one_line(jobs):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as e:
        nvrtc_spills.main(["--jobs", str(jobs)])  # refused before any GPU work
    assert e.value.code == 2
    assert err.getvalue().splitlines()[-1] == (
        f"python -m gpu.lab.nvrtc_spills: error: --jobs: expected 1 to 64 processes, got {jobs}"
    )
