"""sim.machine.storage_cast rounds float32 to fp16 bit for bit as NumPy's astype does (issue 21 item 14: the same
bytes, faster), on every float32 that lands among fp16's subnormals and on the specials."""

import numpy as np
import pytest

from sim.machine.storage_cast import to_storage


def bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16)


@pytest.mark.parametrize("sign", [0, 0x80000000])
def test_every_float32_below_fp16s_smallest_normal(sign):
    """Every 3rd bit pattern with |x| ≤ 2⁻¹⁴ (exponent below 113, and the boundary itself)."""
    patterns = np.arange(0, 0x38800001, 3, dtype=np.uint32) | np.uint32(sign)
    x = patterns.view(np.float32)
    with np.errstate(over="ignore"):
        assert np.array_equal(bits(to_storage(x, np.float16)), bits(x.astype(np.float16)))


def test_softmax_like_rows_specials_and_strided_views():
    rng = np.random.default_rng(0)
    p = np.exp(rng.standard_normal((300, 300)).astype(np.float32) * 6 - 12)  # most below 2⁻¹⁴
    p[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 65520.0, -(2.0**-25)]
    view = p[::3, 5:200]
    with np.errstate(over="ignore"):
        for x in (p, view, -p):
            assert np.array_equal(bits(to_storage(x, np.float16)), bits(x.astype(np.float16)))
    assert to_storage(p, np.float32).dtype == np.float32
