"""sim.machine.storage_cast rounds float32 to fp16 bit for bit as NumPy's astype does, and writes the stored values
back as float32 exactly (issue 21 item 14: the same bytes, faster): on every rounding boundary of every fp16 binade,
on every float32 that lands among fp16's subnormals, on the specials, on views and on softmax-like rows."""

import numpy as np
import pytest

from sim.machine.storage_cast import write_rounded


def rounded(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """write_rounded's two outputs for x: fp16 bits and float32 bits."""
    stored, as_float32 = np.empty(x.shape, np.float16), np.empty(x.shape, np.float32)
    write_rounded(x, stored, as_float32)
    return stored.view(np.uint16), as_float32.view(np.uint32)


def assert_numpys(x: np.ndarray) -> None:
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
        bits16, bits32 = rounded(x)
    assert np.array_equal(bits16, expected.view(np.uint16))
    assert np.array_equal(bits32, expected.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("sign", [0, 0x80000000])
def test_every_float32_below_fp16s_smallest_normal(sign):
    """Every 101st bit pattern with |x| ≤ 2⁻¹⁴ (exponent below 113, and the boundary itself); the rounding
    boundaries among them are all in the midpoint test below."""
    patterns = np.append(np.arange(0, 0x38800000, 101, dtype=np.uint32), np.uint32(0x38800000)) | np.uint32(sign)
    assert_numpys(patterns.view(np.float32))


def test_every_midpoint_between_fp16s_and_its_neighbours():
    """Each finite fp16 value, the float32 midpoint to the next one up (a tie: half to even) and the float32s
    one step either side of that midpoint, both signs: every place where rounding can go one way or the other."""
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    midpoints = (h.view(np.uint32) + np.uint32(0x1000)).view(np.float32)  # halfway to the next fp16 (float32 exact)
    x = np.concatenate([h, midpoints, np.nextafter(midpoints, 0), np.nextafter(midpoints, np.inf)])
    assert_numpys(x)
    assert_numpys(-x)


def test_softmax_like_rows_specials_and_strided_views():
    rng = np.random.default_rng(0)
    p = np.exp(rng.standard_normal((300, 300)).astype(np.float32) * 6 - 12)  # most below 2⁻¹⁴
    for x in (p, p[::3, 5:200], -p, rng.standard_normal((128, 128)).astype(np.float32)):
        assert_numpys(x)
    p[0, :6] = [np.nan, np.inf, -np.inf, -0.0, 65520.0, -(2.0**-25)]
    assert_numpys(p)


def test_into_views_of_hbm_tiles_and_other_dtypes():
    """It writes into a tile of a bigger array and its float32 copy, touching nothing else; float32 and bfloat16
    destinations are NumPy's assignment."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 16)).astype(np.float32) * 1e-4
    hbm, mirror = np.full((32, 32), np.nan, np.float16), np.full((32, 32), np.nan, np.float32)
    write_rounded(x, hbm[8:16, 4:20], mirror[8:16, 4:20])
    assert np.array_equal(hbm[8:16, 4:20].view(np.uint16), x.astype(np.float16).view(np.uint16))
    assert np.array_equal(mirror[8:16, 4:20], x.astype(np.float16).astype(np.float32))
    assert np.isnan(hbm).sum() == 32 * 32 - x.size and np.isnan(mirror).sum() == 32 * 32 - x.size
    for dtype in (np.float32, np.dtype("bfloat16")):
        stored, as_float32 = np.empty(x.shape, dtype), np.empty(x.shape, np.float32)
        write_rounded(x, stored, as_float32)
        assert np.array_equal(stored, x.astype(dtype)) and np.array_equal(
            as_float32, x.astype(dtype).astype(np.float32)
        )
