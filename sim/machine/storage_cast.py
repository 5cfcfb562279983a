"""Rounding float32 to the storage dtype, bit for bit as NumPy's `astype` does, straight into HBM's tile and its
float32 copy. NumPy's fp16 cast is a scalar loop (about 7 ns an element, some 20× that on a float32 that lands among
fp16's subnormals, |x| < 2⁻¹⁴, e.g. most of a softmax row's probabilities); here it is integer arithmetic on the
float32 bits, vectorized:
  a normal fp16 keeps the top 10 of float32's 23 mantissa bits, rounded half to even (add 0xFFF and the last kept
  bit, clear the 13 low bits: the rounded float32, sign and all), and its bits are those shifted right by 13, the
  exponent's bias moved from 127 to 15 (subtract 112 << 10), the sign moved to bit 15;
  an fp16 subnormal is m·2⁻²⁴ with m = rint(|x|·2²⁴), and float32's grid in [0.5, 1) is 2⁻²⁴ wide, so |x| + 0.5
  rounds |x| to it, half to even, once: m is its bits less those of 0.5 (m = 1024 is 2⁻¹⁴, the smallest normal,
  whose bits are 1024 too);
  what rounds to infinity, infinities and NaN take NumPy's own cast."""

import numpy as np

U32 = np.uint32
ABS, SIGN = U32(0x7FFFFFFF), U32(0x80000000)
TINY = U32(0x38800000)  # the bits of 2⁻¹⁴, fp16's smallest normal
HUGE = U32(0x477FF000)  # the bits of 65520, the first float32 that rounds to fp16's infinity
HALF = U32(0x3F000000)  # the bits of 0.5
KEPT = U32(0xFFFFE000)  # float32's sign, exponent and top 10 mantissa bits
REBIAS = U32(112 << 10)  # (127 − 15) in fp16's exponent field
SLOW_SHARE = 1 / 32  # NumPy's cast: ~7 ns an element, ~300 ns a subnormal one; the path here ~8 ns an element
SAMPLE_STRIDE = 61  # the share is judged on every 61st element of each row


def write_rounded(value: np.ndarray, stored: np.ndarray, as_float32: np.ndarray | None = None) -> None:
    """stored[...] = value.astype(stored.dtype), and as_float32[...] = those stored values as float32 (if given)."""
    if _many_subnormals(value, stored):
        a = value.view(U32) & ABS  # |x|'s bits
        if a.max() < HUGE:  # else an infinity or a NaN to be: NumPy's cast
            bits, rounded = _fp16(value.view(U32), a)
            np.copyto(stored.view(np.uint16), bits, casting="unsafe")  # the low 16 bits
            if as_float32 is not None:
                as_float32.view(U32)[...] = rounded
            return
    with np.errstate(over="ignore"):  # past the dtype's range: ±inf, as IEEE stores it (standard attention's S)
        stored[...] = value
    if as_float32 is not None:
        as_float32[...] = stored


def _many_subnormals(value: np.ndarray, stored: np.ndarray) -> bool:
    """Whether fp16 from float32 (no broadcast), with at least SLOW_SHARE of a sample of it below 2⁻¹⁴ (the choice
    of path is about time only: both give the same bits)."""
    if stored.dtype != np.float16 or value.dtype != np.float32 or value.shape != stored.shape or not value.size:
        return False
    sample = np.abs(value[..., ::SAMPLE_STRIDE])
    return np.count_nonzero(sample < np.float32(2.0**-14)) >= SLOW_SHARE * sample.size


def _fp16(b: np.ndarray, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fp16 bits (in uint32) and the float32 bits of the same value, from float32 bits b (|b| = a, below HUGE)."""
    rounded = b >> U32(13)
    rounded &= U32(1)
    rounded += b
    rounded += U32(0xFFF)
    rounded &= KEPT  # x rounded to fp16's precision, as float32 bits (no carry reaches the sign below HUGE)
    bits = rounded & ABS
    bits >>= U32(13)
    bits -= REBIAS
    grid = a.view(np.float32) + np.float32(0.5)  # 0.5 + m·2⁻²⁴, where |x| < 2⁻¹⁴
    tiny = grid.view(U32) - HALF
    _blend(bits, tiny, a)
    grid -= np.float32(0.5)  # m·2⁻²⁴, exactly
    sign = b & SIGN
    tiny = grid.view(U32)
    tiny |= sign
    _blend(rounded, tiny, a)
    sign >>= U32(16)
    bits |= sign
    return bits, rounded


def _blend(normal: np.ndarray, tiny: np.ndarray, a: np.ndarray) -> None:
    """normal ← tiny where a < TINY, in place, without a branch per element (NumPy's `where` mispredicts on rows
    that mix normal and subnormal values): the mask is the sign of a − TINY spread over all 32 bits."""
    mask = a.view(np.int32) - np.int32(TINY)
    mask >>= np.int32(31)
    tiny ^= normal
    tiny &= mask.view(U32)
    normal ^= tiny
