"""Reference solutions of lesson 13's exercises (the test suite runs the lesson with these in place)."""


# %% exercise:sectors_touched
def sectors_touched(addresses, width):
    """Distinct 32-byte sectors touched by lanes reading `width` bytes at each of `addresses`."""
    first, last = addresses // 32, (addresses + width - 1) // 32  # the sectors of each lane's first and last byte
    return len({s for f, l in zip(first.tolist(), last.tolist(), strict=True) for s in range(f, l + 1)})


# %% exercise:bank_wavefronts
def bank_wavefronts(addresses):
    """Wavefronts of one warp's 4-byte shared-memory access: the busiest bank's distinct words."""
    words = set((addresses // 4).tolist())  # a word many lanes read is one broadcast
    return int(np.bincount([w % 32 for w in words], minlength=32).max())


# %% exercise:copy_ratio
def copy_ratio(row_bytes, pad):
    """L2 → SM bytes ÷ bytes asked, copying an even number of rows of row_bytes into rows padded by pad bytes."""
    # row r starts at r·(row_bytes + pad): half a sector off on every other row when the pitch is 16 mod 32,
    # and such a row's sectors each land in two 32-byte pieces of shared memory: twice the bytes
    return 1.5 if (row_bytes + pad) % 32 == 16 else 1.0
