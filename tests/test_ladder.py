"""gpu.lab.ladder on a machine without a GPU: its arguments are refused in one line before any GPU is needed."""

import pytest

from gpu.lab import ladder
from gpu.lab.bench import RUNG1_MAX_N
from gpu.lab.harness import TOKENS
from sim.core.errors import InputError


def test_the_ladder_runs_at_the_largest_n_the_benchmark_times_rung_1_at():
    assert ladder.N == RUNG1_MAX_N == 2048


@pytest.mark.parametrize("n", [0, -1, TOKENS + 1])
def test_an_n_outside_the_benchmark_is_refused(n):
    with pytest.raises(InputError, match=rf"^n: expected 1 … {TOKENS} \(the benchmark's tokens per batch\), got {n}$"):
        ladder.run_ladder(n=n)


def test_a_dtype_the_tensor_core_rungs_cannot_run_is_refused():
    with pytest.raises(InputError, match=r"^dtype: expected one of float16, bfloat16 .*got 'float32'$"):
        ladder.run_ladder(dtype="float32")


def test_the_command_prints_one_line_and_exits_2(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        ladder.main(["--json", str(tmp_path / "x.json"), "--n", "0"])
    assert e.value.code == 2
    assert capsys.readouterr().err == f"error: n: expected 1 … {TOKENS} (the benchmark's tokens per batch), got 0\n"
    assert not (tmp_path / "x.json").exists()
