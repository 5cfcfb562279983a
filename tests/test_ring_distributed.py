"""The real ring on torch.distributed (gloo, CPU processes, launched by torchrun) gives one process's attention.

Skipped where torch is not installed (it is the optional extra `distributed`). The ranks' shards are put back
together and held to float64 attention from the definition, here, independently of the module's own check.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.api import reference, tolerance
from sim.api.inputs import random_inputs

torch = pytest.importorskip(
    "torch", reason="torch is the optional extra `distributed`; pip install flashsim[distributed]"
)
ROOT = Path(__file__).parent.parent


def torchrun(P: int, *args: str, out: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(P),
               "-m", "sim.lab.ring_distributed", *args, "--out", str(out)]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(("causal", "sharding"), [(False, "contiguous"), (True, "zigzag")])
def test_two_gloo_processes_give_one_process_attention(tmp_path, causal, sharding):
    n, d = 48, 8
    args = ["--seqlen", str(n), "--headdim", str(d), "--sharding", sharding, *(["--causal"] if causal else [])]
    done = torchrun(2, *args, out=tmp_path / "ring.json")
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "ring.json").read_text())
    q, k, v, do = (x[0, 0] for x in random_inputs(1, 1, n, n, d, "fp32", 0, grad=True))
    o, _ = reference.attention(q, k, v, causal=causal)
    dq, dk, dv = reference.attention_backward(q, k, v, do, causal=causal)
    assert set(report["checks"]) == {"O", "L", "dQ", "dK", "dV"}
    assert all(c["ok"] for c in report["checks"].values()), report["checks"]
    # O is held to the one stated bound (sim.api.tolerance, the ring's: Bc = 1, the most rescales) on this
    # test's inputs; on these inputs the error is also within the float32 floor 1e-5·max|O|
    expected = tolerance.tolerance("ring", "fp32", d=d, nk=n, block_cols=1, v_max=float(np.abs(v).max()),
                                   sigma=tolerance.score_scale(q, k, 1 / np.sqrt(d)), ref_max=float(np.abs(o).max()))  # fmt: skip
    assert report["checks"]["O"]["bound"] == pytest.approx(expected.bound)
    assert report["checks"]["O"]["error"] <= 1e-5 * np.abs(o).max()
    for name, ref in (("dQ", dq), ("dK", dk), ("dV", dv)):
        assert report["checks"][name]["bound"] == pytest.approx(tolerance.gradient_bound(ref))
    assert [len(steps) for steps in report["steps"]["forward"]] == [2, 2]  # P ring steps on each rank


def test_a_bad_split_is_refused_in_one_line(tmp_path):
    done = torchrun(2, "--seqlen", "10", "--sharding", "zigzag", out=tmp_path / "x.json")
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: sharding: zigzag cuts N = 10 into 2P = 4 equal chunks; choose N a multiple of 4 "
                      "or --sharding contiguous"]  # fmt: skip
