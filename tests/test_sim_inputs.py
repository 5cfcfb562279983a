"""Bad input: a one-line error naming the argument and what is allowed; exit code 2 from the CLI, no traceback."""

import numpy as np
import pytest
from click.testing import CliRunner

import sim
from sim.cli import app
from sim.core.errors import InputError, SRAMOverflowError

Q = np.ones((8, 4), np.float32)


@pytest.mark.parametrize(
    "args,kwargs,names",
    [
        (("flash2", Q, np.ones((6, 4), np.float32), np.ones((7, 4), np.float32)), {}, "v: shape (7, 4)"),
        (("flash2", Q, np.ones((6, 3), np.float32), np.ones((6, 3), np.float32)), {}, "k: head dimension 3"),
        (("flash2", np.ones((8, 0)), np.ones((8, 0)), np.ones((8, 0))), {}, "d: head dimension must be at least 1"),
        (("flash2", np.ones((0, 4)), Q, Q), {}, "q: shape (0, 4) has an empty dimension"),
        (("flash3", Q, Q, Q), {}, "algorithm: unknown 'flash3'"),
        (("flash2", Q.astype(np.int32), Q, Q), {}, "q: dtype int32 is not supported"),
        (("flash2", Q, Q.astype(np.float16), Q), {}, "differ from q's float32"),
        (("flash2", np.ones((3, 8, 4)), Q, Q), {}, "q: shape (3, 8, 4) has 3 dimensions"),
        (("flash2", np.full((8, 4), np.nan), Q, Q), {}, "q: contains NaN or Inf"),
        (("flash2", Q, np.full((8, 4), np.inf), Q), {}, "k: contains NaN or Inf"),
        (("flash2", np.full((8, 4), 1e39), Q, Q), {}, "q: contains NaN or Inf (or values beyond float32"),
        (("flash2", Q, Q, Q), {"block_rows": 0}, "block_rows: must be a positive integer"),
        (("flash2", Q, Q, Q), {"sram_bytes": -5}, "sram_bytes: must be a positive integer"),
        (("flash2", Q, Q, Q), {"scale": float("nan")}, "scale: must be a finite number"),
        (("flash2", Q, Q, Q), {"record": "all"}, "record: unknown 'all'"),
        (("flash2", Q, Q, Q), {"hardware": "B200"}, "hardware: unknown preset 'B200'"),
        (("flash2", Q, Q, Q), {"blocks": "big"}, "blocks: unknown 'big'"),
    ],
)
def test_api_errors_name_the_argument(args, kwargs, names):
    with pytest.raises(InputError) as e:
        sim.run(*args, **kwargs)
    assert names in str(e.value) and "\n" not in str(e.value)


def test_blocks_that_overflow_sram_name_the_resident_buffers():
    q = np.ones((256, 64), np.float16)
    with pytest.raises(SRAMOverflowError) as e:
        sim.run("flash2", q, q, q, block_rows=256, block_cols=256, hardware="A100-40GB")
    message = str(e.value)
    for name in ("Q_i 32.0 KiB", "O_i 64.0 KiB", "K_j 32.0 KiB", "V_j 32.0 KiB"):
        assert name in message
    assert "S_ij (256.0 KiB) does not fit" in message


def invoke(*args):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize(
    "args,expected",
    [
        (["run", "--algo", "flash3"], "'--algo'"),
        (["run", "--dtype", "fp8"], "'--dtype'"),
        (["run", "--n", "0"], "'--n'"),
        (["run", "--d", "0"], "'--d'"),
        (["run", "--nk", "-3"], "'--nk'"),
        (["run", "--hardware", "B200"], "'--hardware'"),
        (
            ["run", "--n", "256", "--d", "64", "--block-rows", "256", "--block-cols", "256"],
            "error: --block-rows, --block-cols, --d: SRAM overflow",
        ),  # the blocks typed named first (red team 95)
        (
            [
                "run",
                "--n",
                "7",
                "--d",
                "31",
                "--block-rows",
                "3",
                "--block-cols",
                "3",
                "--hardware",
                "toy",
                "--dtype",
                "fp32",
            ],
            "error: --block-rows, --block-cols, --d, --hardware: SRAM overflow",
        ),
        (["run", "--blocks", "paper", "--block-rows", "8"], "--blocks paper: cannot be combined"),
        (["run", "--algo", "standard", "--seqlens", "17,2", "--backward"], "error: --algo standard: a packed batch"),
        (["trace", "--algo", "standard", "--seqlens", "5,9", "--backward"], "error: --algo standard: a packed batch"),
        (["run", "--n", "1024", "--d", "64", "--blocks", "paper"], "the paper's rule"),
        (["run", "--scale", "inf"], "scale: must be a finite number"),
        (["run", "--frobnicate"], "No such option"),
    ],
)
def test_cli_bad_input_is_one_line_on_stderr_with_exit_code_2(args, expected):
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0]
    assert "Traceback" not in result.output and result.stdout == ""
