"""sim.machine.l2.HeldL2: tiles that fill a share of one L2 half by how they are touched (run 41-dram12), worked by
hand beside the plain LRU cache on the same requests."""

from sim.machine.l2 import L2, HeldL2, Traffic

HELD = {"shared": 1.0, "private": 0.5, "add": 0.5, "write": 0.25}
# (tile, bytes, kind, the block asking)
REQUESTS = [
    (("A",), 40, "r", 0),  # a miss: 40 read; one reader so far
    (("A",), 40, "r", 1),  # a hit, a second reader: A is shared now
    (("B",), 80, "rw", 0),  # a miss: an add reads the tile first, 80; dirty
    (("C",), 80, "w", 0),  # a write: nothing read; dirty
    (("D",), 8, "r", 2),  # a miss: 8
    (("A",), 40, "r", 0),
    (("B",), 80, "rw", 0),
]


def test_held_shares_keep_what_whole_tiles_evict():
    t = Traffic()
    cache = HeldL2(100, t, HELD)
    for name, nbytes, kind, block in REQUESTS:
        cache.touch(name, nbytes, kind, block)
    # filled: A 40·0.5 = 20 → shared 40; B 80·0.5 = 40 (size 80); C 80·0.25 = 20 (size 100: no eviction);
    # D 8·0.5 = 4 (size 104 > 100): A, the least recent, leaves (clean) → 64; A again: a miss, 40 read, private
    # (one reader since it came back) 20 → 84; B: a hit
    assert t.dram_read == 40 + 80 + 8 + 40
    assert t.dram_write == 0
    assert cache.size == 84
    assert list(cache.tiles) == [("C",), ("D",), ("A",), ("B",)]
    assert cache.dirty() == 80 + 80  # B and C, by their bytes (what reaches DRAM), not their shares


def test_whole_tiles_on_the_same_requests():
    t = Traffic()
    cache = L2(100, t)
    for name, nbytes, kind, _ in REQUESTS:
        cache.touch(name, nbytes, kind)
    # A 40; B 80 → 120: A leaves; C → 160: B leaves dirty (80 written); D 8 → 88; A 40 → 128: C leaves dirty (80);
    # B 80 → 128: D and A leave → 80
    assert t.dram_read == 40 + 80 + 8 + 40 + 80
    assert t.dram_write == 80 + 80
    assert list(cache.tiles) == [("B",)]
    assert cache.dirty() == 80
