"""Bad input gets one line naming the argument and what is allowed; no GPU gets one line naming what is missing."""

import pytest

import gpu
from sim.core.errors import FlashsimError, InputError


@pytest.mark.skipif(gpu.available()[0], reason="a GPU is present")
def test_without_gpu_every_entry_point_says_what_is_missing():
    from gpu.autograd import attention
    from gpu.lab.train import train

    calls = (
        lambda: gpu.flash_attention(None, None, None),
        lambda: gpu.flash_attention_backward(None, None, None, None, None, None),
        lambda: gpu.standard_attention(None, None, None),
        lambda: gpu.standard_attention_backward(None, None, None, None, None),
        lambda: attention(None, None, None),
        train,
    )
    for call in calls:
        with pytest.raises(gpu.GPUUnavailableError, match="needs CuPy and an NVIDIA GPU") as e:
            call()
        assert isinstance(e.value, FlashsimError) and "\n" not in str(e.value)


def test_available_reports_a_reason():
    ok, reason = gpu.available()
    assert isinstance(ok, bool) and reason


@pytest.mark.gpu
@pytest.mark.parametrize(
    "make,match",
    [
        (
            lambda c, r: (r((1, 1, 8, 64), "float16"), r((1, 1, 8, 64), "float16"), r((1, 1, 9, 64), "float16")),
            "k, v: shapes",
        ),
        (
            lambda c, r: (r((1, 1, 8, 64), "float16"), r((1, 2, 8, 64), "float16"), r((1, 2, 8, 64), "float16")),
            "k: expected shape",
        ),
        (
            lambda c, r: (r((1, 1, 8, 64), "float16"), r((1, 1, 8, 32), "float16"), r((1, 1, 8, 32), "float16")),
            "k: expected shape",
        ),
        (lambda c, r: (r((1, 1, 0, 64), "float16"),) * 3, "q: every dimension"),
        (lambda c, r: (r((1, 1, 8, 129), "float16"),) * 3, r"d \(head dim"),
        (lambda c, r: (r((8, 64), "float16"),) * 3, "q: expected 4 dimensions"),
        (lambda c, r: (c.ones((1, 1, 8, 64), c.float64),) * 3, "q: dtype float64"),
        (
            lambda c, r: (r((1, 1, 8, 64), "float16"), r((1, 1, 8, 64), "bfloat16"), r((1, 1, 8, 64), "float16")),
            "k: dtype|k, v: dtypes",
        ),
        (lambda c, r: (r((1, 1, 64, 8), "float16").swapaxes(2, 3),) * 3, "q: must be C-contiguous"),
        (lambda c, r: (r((1, 1, 8, 64), "float32"),) * 3, "q: dtype float32"),
    ],
)
def test_bad_input_is_named(make, match):
    cupy = pytest.importorskip("cupy")

    def rand(shape, dtype):
        return gpu.dtypes.from_float32(cupy.random.standard_normal(shape, dtype=cupy.float32), dtype)

    with pytest.raises(InputError, match=match) as e:
        gpu.flash_attention(*make(cupy, rand))
    assert "\n" not in str(e.value)


@pytest.mark.gpu
def test_bad_options_are_named():
    cupy = pytest.importorskip("cupy")
    q = cupy.ones((1, 1, 8, 64), cupy.float16)
    with pytest.raises(InputError, match=r"kernel: the forward rungs are 1, 2, 3, 6, got 'v9'"):
        gpu.flash_attention(q, q, q, kernel="v9")
    with pytest.raises(InputError, match="scale: expected a positive"):
        gpu.flash_attention(q, q, q, scale=-1.0)
    with pytest.raises(InputError, match="causal: expected True or False"):
        gpu.flash_attention(q, q, q, causal="yes")
    with pytest.raises(InputError, match="q: expected a CuPy array"):
        gpu.flash_attention(q.get(), q, q)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("arg,value", [("q", float("nan")), ("k", float("inf")), ("v", float("-inf"))])
def test_nonfinite_inputs_are_named_when_checked(dtype, arg, value):
    cupy = pytest.importorskip("cupy")
    x = {
        name: gpu.dtypes.from_float32(cupy.random.standard_normal((1, 2, 16, 64), dtype=cupy.float32), dtype)
        for name in "qkv"
    }
    x[arg][0, 1, 5, 7] = gpu.dtypes.from_float32(cupy.full((), value, cupy.float32), dtype)
    for call in (gpu.flash_attention, gpu.standard_attention):
        with pytest.raises(InputError, match=f"{arg}: contains NaN or Inf") as e:
            call(x["q"], x["k"], x["v"], check_finite=True)
        assert "\n" not in str(e.value)
    o = gpu.flash_attention(x["q"], x["k"], x["v"])  # unchecked by default: it runs, NaN flows through
    assert o.shape == (1, 2, 16, 64)


@pytest.mark.gpu
def test_backward_bad_input_is_named():
    cupy = pytest.importorskip("cupy")
    q, k, v = (cupy.ones((1, 2, 8, 64), cupy.float16) for _ in range(3))
    o, lse = gpu.flash_attention(q, k, v, return_lse=True)
    cases = [
        ((q, k, v, o[:, :, :4].copy(), lse, o), "o: expected q's shape"),
        ((q, k, v, o, lse.astype(cupy.float16), o), "lse: dtype float16"),
        ((q, k, v, o, lse[:, :, :4].copy(), o), r"lse: expected shape \(1, 2, 8\)"),
        ((q, k, v, o, lse, o.astype(cupy.float32)), "do: dtype float32"),
        ((q, k, v, o, lse, o.get()), "do: expected a CuPy array"),
    ]
    for args, match in cases:
        with pytest.raises(InputError, match=match) as e:
            gpu.flash_attention_backward(*args)
        assert "\n" not in str(e.value)
    with pytest.raises(InputError, match=r"kernel: the backward rungs are 4, 5, 7, got 3"):
        gpu.flash_attention_backward(q, k, v, o, lse, o, kernel=3)
    with pytest.raises(InputError, match="return_lse: expected True or False"):
        gpu.flash_attention(q, k, v, return_lse="yes")
    with pytest.raises(InputError, match="probs: expected P"):
        gpu.standard_attention_backward(q, k, v, o, o)
    d = cupy.full((1, 2, 8, 64), cupy.nan, cupy.float16)
    with pytest.raises(InputError, match="do: contains NaN or Inf"):
        gpu.flash_attention_backward(q, k, v, o, lse, d, check_finite=True)


@pytest.mark.skipif(gpu.available()[0], reason="a GPU is present")
def test_demo_train_without_gpu_exits_2_with_one_line():
    from click.testing import CliRunner

    from sim.cli import app

    result = CliRunner().invoke(app, ["demo", "train", "--steps", "10"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "needs CuPy and an NVIDIA GPU" in lines[0]
