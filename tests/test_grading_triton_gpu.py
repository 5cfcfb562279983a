"""What the Triton grader refuses or computes as a GPU would, run on a GPU: a loop whose step is below zero and not a
constexpr at its `for` runs no iteration there (red team 91), one whose step is computes the master's O; a loop's
variable is an i32 and a block's truth elementwise (red team 106)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from grading_submissions import triton_kernels as kernels

pytestmark = pytest.mark.gpu
N, Nk, d, Br, Bc = 68, 46, 30, 32, 32  # ragged: the last blocks of Q and of K/V are partial
COMPILED = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # on the GPU (conftest interprets)
RUN = """
import importlib.util, json, sys, torch
spec = importlib.util.spec_from_file_location("walk", sys.argv[1])
walk = importlib.util.module_from_spec(spec)
spec.loader.exec_module(walk)
N, Nk, d, Br, Bc = (int(a) for a in sys.argv[2:7])
g = torch.Generator().manual_seed(0)
Q, K, V = (torch.randn(n, d, generator=g).half().cuda() for n in (N, Nk, Nk))
O, L, W = torch.full((N, d), float("nan"), device="cuda").half(), torch.zeros(N, device="cuda"), torch.zeros(1, device="cuda")
walk.flash2_forward[((N + Br - 1) // Br,)](Q, K, V, O, L, W, N, Nk, d, d ** -0.5, BLOCK_M=Br, BLOCK_N=Bc, BLOCK_D=32,
                                          CAUSAL=False)
print(json.dumps({k: t.float().cpu().tolist() for k, t in dict(Q=Q, K=K, V=V, O=O, L=L).items()}))
"""


@pytest.mark.parametrize("how", list(kernels.WALKS))
def test_a_loop_counting_down_runs_on_a_gpu_only_with_its_step_constant_at_the_for(tmp_path, how):
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    path = kernels.walks_down(tmp_path, how)
    done = subprocess.run([sys.executable, "-c", RUN, str(path), *map(str, (N, Nk, d, Br, Bc))],
                          capture_output=True, text=True, env=COMPILED, timeout=300, check=True)  # fmt: skip
    got = {k: np.array(v, dtype=np.float64) for k, v in json.loads(done.stdout).items()}
    S = got["Q"] @ got["K"].T / np.sqrt(d)  # (N, Nk), float64 from the definition
    P = np.exp(S - S.max(axis=1, keepdims=True))
    O = P @ got["V"] / P.sum(axis=1, keepdims=True)
    if how in kernels.COUNTED_DOWN:  # fp16 inputs, fp32 sums, O stored in fp16: within 2⁻¹⁰·max|O| and a little
        assert np.abs(got["O"] - O).max() <= 2**-10 * np.abs(O).max() + 1e-3
    else:  # no K/V block seen: O_i = 0 / 1 and L_i = −∞ in every row, as the grader's refusal says
        assert (got["O"] == 0).all() and np.isneginf(got["L"]).all()


HELPERS = """
import importlib.util, json, sys, torch
spec = importlib.util.spec_from_file_location("walks", sys.argv[1])
walks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(walks)
N, BLOCK = int(sys.argv[2]), int(sys.argv[3])
out = {}
for name in sys.argv[4:]:
    X = torch.full((N,), -1.0, device="cuda")
    try:
        getattr(walks, name)[(1,)](X, N, BLOCK=BLOCK)
        out[name] = X.cpu().tolist()
    except Exception as e:  # (what Triton's compiler refuses: not run on a GPU at all)
        out[name] = f"{type(e).__name__}: {str(e)[:300]}"
print(json.dumps(out))
"""


def test_a_helper_s_step_counts_down_on_a_gpu_only_where_its_call_passes_a_constexpr(tmp_path):
    """tests/test_grading_triton_loops' kernels compiled for the GPU: those the grader refuses (a caller's loop
    variable, a local, a keyword or a mapping passed as the helper's step) run no iteration; the others count down."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from test_grading_triton_loops import BLOCK, COUNTED, REFUSED, SOURCE
    from test_grading_triton_loops import N as n

    (path := tmp_path / "walks.py").write_text(SOURCE)
    names = [*REFUSED, *COUNTED]
    done = subprocess.run([sys.executable, "-c", HELPERS, str(path), str(n), str(BLOCK), *names],
                          capture_output=True, text=True, env=COMPILED, timeout=300, check=True)  # fmt: skip
    got = json.loads(done.stdout)

    def counted(step: int) -> list[float]:
        expected = np.full(n, -1.0)  # the k-th index from n − 1 down by `step` holds k
        expected[np.arange(n - 1, -1, -step)] = np.arange(len(range(n - 1, -1, -step)))
        return expected.tolist()

    for name in REFUSED:  # no iteration (one_line: its constant call's alone), or not compiled at all
        assert got[name] == (counted(BLOCK) if name == "one_line" else [-1.0] * n) or isinstance(got[name], str), name
    assert {name for name in REFUSED if isinstance(got[name], str)} <= {"mapping"}  # H200: Triton refuses `**{…}`
    for name, step in COUNTED.items():
        assert got[name] == counted(step), name


SEMANTICS = """
import importlib.util, json, sys, torch
spec = importlib.util.spec_from_file_location("semantics", sys.argv[1])
semantics = importlib.util.module_from_spec(spec)
spec.loader.exec_module(semantics)
n, BLOCK, columns = (int(a) for a in sys.argv[2:5])
X = torch.full((2 * n * columns,), float("nan"), device="cuda")
semantics.arithmetic[(1,)](X, n, BLOCK=BLOCK)
out = {"arithmetic": X.cpu().tolist()}
for name in sys.argv[6:]:
    X = torch.tensor(json.loads(sys.argv[5]) + [float("nan")] * BLOCK, device="cuda")
    getattr(semantics, name)[(1,)](X, n, BLOCK=BLOCK)
    out[name] = X[2 * BLOCK:].cpu().tolist()
print(json.dumps(out))
"""


def test_a_loop_variable_is_an_i32_and_a_block_s_truth_elementwise_on_a_gpu(tmp_path):
    """tests/test_grading_triton_semantics' kernels compiled for the GPU: a loop's variable divides, takes remainders
    and wraps as C's i32 (what the grader's interpreter now computes); max, min, not and `and` of blocks are
    elementwise (what the grader now refuses, as the interpreter took every block as True)."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from test_grading_triton_semantics import BLOCK, COLUMNS, ELEMENTWISE, A, B, arithmetic, source
    from test_grading_triton_semantics import n as rows

    values = json.dumps([*A.tolist(), *B.tolist()])
    done = subprocess.run([sys.executable, "-c", SEMANTICS, str(source(tmp_path)), str(rows), str(BLOCK), str(COLUMNS),
                           values, *ELEMENTWISE], capture_output=True, text=True, env=COMPILED, timeout=300, check=True)  # fmt: skip
    got = json.loads(done.stdout)
    np.testing.assert_array_equal(np.array(got["arithmetic"]).reshape(2 * rows, COLUMNS), arithmetic())
    for name, expected in ELEMENTWISE.items():
        np.testing.assert_array_equal(np.array(got[name]), expected, err_msg=name)


def test_true_hints_compute_on_a_gpu_and_the_false_one_the_grader_refuses_misaligns(tmp_path):
    """tests/test_grading_triton_hints' kernels compiled for the GPU at d = 30 (fp16): the hinted master (its keys a
    multiple of BLOCK_N, contiguous) computes O as the master does; `tl.multiple_of(tl.maximum(d, 1), 16)`, which the
    grader refuses, stops the kernel (red team 106 on an H200: misaligned address)."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from test_grading_triton_hints import HINTED, KEYS, LYING

    hinted = kernels.edit(tmp_path, "hinted", KEYS, HINTED)
    lying = kernels.edit(tmp_path, "lying", "    i = tl.program_id(0)\n", LYING)
    shape = [str(x) for x in (N, Nk, 30, Br, Bc)]
    done = subprocess.run([sys.executable, "-c", RUN, str(hinted), *shape], capture_output=True, text=True, env=COMPILED,
                          timeout=300, check=True)  # fmt: skip
    got = {k: np.array(v, dtype=np.float64) for k, v in json.loads(done.stdout).items()}
    S = got["Q"] @ got["K"].T / np.sqrt(30)  # (N, Nk), float64 from the definition
    P = np.exp(S - S.max(axis=1, keepdims=True))
    O = P @ got["V"] / P.sum(axis=1, keepdims=True)
    assert np.abs(got["O"] - O).max() <= 2**-10 * np.abs(O).max() + 1e-3  # fp16 inputs and O, fp32 sums
    failed = subprocess.run([sys.executable, "-c", RUN, str(lying), *shape], capture_output=True, text=True, env=COMPILED,
                            timeout=300)  # fmt: skip
    assert failed.returncode != 0 and "misaligned address" in failed.stderr, failed.stderr[-500:]
