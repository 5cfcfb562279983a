"""The one visibility rule (`sim.machine.mask.Rule`) against the window's definition, built here from i and j."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.machine import mask

side = st.one_of(st.none(), st.integers(-1, 30))


def definition(N, Nk, causal, window, group):
    """(rows, keys) visibility of g·N interleaved rows: row r is position r // g; −1 or None is unbounded."""
    left, right = (-1, -1) if window is None else (-1 if w is None else w for w in window)
    i = (np.arange(group * N) // group)[:, None] + Nk - N
    j = np.arange(Nk)[None, :]
    seen = np.ones((group * N, Nk), bool)
    if causal:
        seen &= j <= i
    if left != -1:
        seen &= j >= i - left
    if right != -1:
        seen &= j <= i + right
    return seen


@settings(max_examples=200, deadline=None)
@given(
    N=st.integers(1, 40), Nk=st.integers(1, 40), Br=st.integers(1, 12), Bc=st.integers(1, 12), causal=st.booleans(),
    window=st.one_of(st.none(), st.tuples(side, side)), group=st.integers(1, 3),
)  # fmt: skip
def test_rule_matches_the_definition_tile_by_tile(N, Nk, Br, Bc, causal, window, group):
    rule = mask.rule(N, Nk, causal, window, group)
    seen = definition(N, Nk, causal, window, group)
    assert (rule.visible((0, group * N), (0, Nk)) == seen).all()
    for r0 in range(0, group * N, Br):
        rows = (r0, min(r0 + Br, group * N))
        tiles = [seen[rows[0] : rows[1], c0 : min(c0 + Bc, Nk)] for c0 in range(0, Nk, Bc)]
        some = [j for j, t in enumerate(tiles) if t.any()]
        every = [j for j, t in enumerate(tiles) if t.all()]
        assert list(rule.seen_blocks(rows, Bc)) == some  # a run, found in O(1)
        assert list(rule.full_blocks(rows, Bc)) == every
        for j, t in enumerate(tiles):
            cols = (j * Bc, min((j + 1) * Bc, Nk))
            assert rule.block_seen(rows, cols) == t.any()
            assert rule.block_fully_seen(rows, cols) == t.all()


def test_causal_is_the_window_minus_one_zero():
    assert mask.rule(7, 9, causal=True) == mask.rule(7, 9, window=(-1, 0)) == mask.rule(7, 9, True, (None, 5))
    assert mask.rule(7, 9, causal=True, window=(3, 4)) == mask.Rule(7, 9, 3, 0)


@settings(max_examples=300, deadline=None)
@given(
    N=st.integers(1, 400), Nk=st.integers(1, 400), Br=st.integers(1, 70), Bc=st.integers(1, 70), causal=st.booleans(),
    window=st.one_of(st.none(), st.tuples(side, side)),
)  # fmt: skip
def test_the_tile_pairs_visited_are_the_block_loop_s_in_o_log_steps(N, Nk, Br, Bc, causal, window):
    rule = mask.rule(N, Nk, causal, window)
    loop = sum(len(rule.seen_blocks((r0, min(r0 + Br, N)), Bc)) for r0 in range(0, N, Br))
    assert mask.visited(rule, Br, Bc) == loop


def test_a_window_s_share_at_n_2_to_the_53_is_summed_not_walked(monkeypatch):
    """`run --n 9007199254740992 --window 100,0` (and a --seqlens of it) walked 7·10¹³ row blocks before refusing."""
    calls, seen_blocks = [], mask.Rule.seen_blocks

    def counted(self, rows, Bc):
        calls.append(rows)
        assert len(calls) <= 4, "walked the row blocks one by one"
        return seen_blocks(self, rows, Bc)

    monkeypatch.setattr(mask.Rule, "seen_blocks", counted)
    T = 2**46  # row blocks of 128: block 0 sees its own K/V block, every later one that and the one before
    assert mask.window_share(128 * T, 128 * T, 128, 128, False, (100, 0)) == (2 * T - 1) / T**2
