"""sim.machine.sectors against cases worked by hand: sectors of a warp's access, bank conflicts, layouts."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.core.errors import InputError
from sim.machine.ledger import Ledger
from sim.machine.sectors import Layout, column_read, copy_in, sectors, tile_read, wavefronts

LANES = np.arange(32)


def test_sectors_of_one_warp_by_hand():
    assert sectors(4 * LANES, 4).sectors == 4  # 128 contiguous aligned bytes: 4 sectors
    assert sectors(4 + 4 * LANES, 4).sectors == 5  # shifted by 4 bytes: bytes 4 … 131 touch sectors 0 … 4
    assert sectors(32 * LANES, 4).sectors == 32  # one lane a sector: 128 bytes asked, 1,024 moved
    assert sectors(np.zeros(32, dtype=int), 4).sectors == 1  # every lane the same word
    assert sectors([28], 8).sectors == 2  # bytes 28 … 35 straddle sectors 0 and 1
    a = sectors(16 * LANES, 16)
    assert (a.asked_bytes, a.sectors, a.moved_bytes) == (512, 16, 512)


@given(st.lists(st.integers(0, 4096), min_size=1, max_size=32), st.sampled_from([1, 2, 4, 8, 16]))
def test_sectors_are_the_distinct_32_byte_pieces_of_the_bytes_touched(addresses, width):
    touched = {b // 32 for a in addresses for b in range(a, a + width)}  # byte by byte
    assert sectors(addresses, width).sectors == len(touched)


def test_bank_conflicts_by_hand():
    assert wavefronts(4 * LANES).wavefronts == 1  # 32 consecutive words: 32 banks
    assert wavefronts(128 * LANES).wavefronts == 32  # stride 128 B = 32 words: one bank, 32 words
    assert wavefronts(132 * LANES).wavefronts == 1  # stride 33 words: banks 0, 1, …, 31
    assert wavefronts(np.zeros(32, dtype=int)).wavefronts == 1  # one word: a broadcast
    assert wavefronts([0, 128]).wavefronts == 2  # two words of bank 0
    assert wavefronts([0, 0, 128]).wavefronts == 2
    a = wavefronts(16 * LANES, 16)  # 16 bytes a lane: 4 phases of 8 lanes, each 128 contiguous bytes
    assert (a.wavefronts, a.ideal_wavefronts, a.conflict) == (4, 4, 1.0)
    b = wavefronts(128 * LANES, 16)  # each phase: 8 lanes on banks 0–3
    assert (b.wavefronts, b.conflict) == (32, 8.0)


def test_layouts_by_hand():
    padded, swizzled = Layout(128, pad=16), Layout(128, swizzle=True)
    assert padded.pitch == 144 and padded.address(3, 20) == 3 * 144 + 20
    assert swizzled.address(0, 20) == 20  # row 0: no change
    assert swizzled.address(3, 20) == 3 * 128 + (1 ^ 3) * 16 + 4  # chunk 1 of row 3 goes to chunk 2
    for r in range(16):  # a row's 16-byte chunks are permuted within its 128 bytes
        starts = sorted(int(swizzled.address(r, 16 * c)) - r * 128 for c in range(8))
        assert starts == [16 * c for c in range(8)]


def test_a_column_read_down_a_tile():
    assert column_read(Layout(128), 32, 0).wavefronts == 32  # fp32 32 × 32: every row's word 0 in bank 0
    assert column_read(Layout(128, pad=4), 32, 0).wavefronts == 1  # one word of padding: bank r for row r
    assert column_read(Layout(128, swizzle=True), 32, 0).wavefronts == 4  # 8 chunk positions: rows r, r+8, … share
    # ldmatrix-like: 16 bytes of 32 rows' starts, 8 rows a phase
    assert column_read(Layout(128), 32, 0, 16).wavefronts == 32
    assert column_read(Layout(128, pad=16), 32, 0, 16).wavefronts == 4
    assert column_read(Layout(128, swizzle=True), 32, 0, 16).wavefronts == 4


def test_copying_into_padded_rows_moves_half_again_as_many_sectors():
    assert copy_in(Layout(128), 4).sectors == 16
    # rows start at 0, 144, 288, 432: rows 1 and 3 are 16 bytes off a 32-byte boundary, so each of their
    # 4 global sectors lands in 2 shared ones: 4 + 8 + 4 + 8
    assert copy_in(Layout(128, pad=16), 4).sectors == 24
    assert copy_in(Layout(128, swizzle=True), 4).sectors == 16
    assert copy_in(Layout(256, pad=16), 2).sectors == 8 + 16  # d = 128 in fp16: the same half-sector shift
    assert copy_in(Layout(128, pad=32), 4).sectors == 16  # a whole sector of padding shifts nothing


def test_coalesced_and_uncoalesced_tile_reads():
    row, column = tile_read(64, 64, 2, "row"), tile_read(64, 64, 2, "column")
    assert (row.asked_bytes, row.sectors) == (8192, 256)  # 128 warps × 64 contiguous bytes: 2 sectors each
    assert (column.asked_bytes, column.sectors) == (8192, 4096)  # 128 warps × 32 rows: 32 sectors each


def test_an_access_books_into_the_ledger():
    ledger = Ledger()
    (copy_in(Layout(128, pad=16), 4) + column_read(Layout(128), 32, 0)).book(ledger, "K_j")
    assert ledger.per_tensor("l2") == {"K_j": {"read": 24 * 32, "write": 0}}
    assert ledger.work["shared_wavefronts"] == 32


@pytest.mark.parametrize(
    "call",
    [
        lambda: sectors(np.arange(33), 4),
        lambda: sectors([-4], 4),
        lambda: wavefronts([0, 3], 4),
        lambda: wavefronts([0], 12),
        lambda: copy_in(Layout(100), 2),
        lambda: tile_read(4, 4, 2, "diagonal"),
    ],
)
def test_what_the_model_refuses(call):
    with pytest.raises(InputError):
        call()
