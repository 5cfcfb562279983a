"""`--counts-only` answers from the closed form (`sim.api.closed_form`): the same counts the simulator's ledger books,
wherever both run, for every algorithm, shape, block, mask, dtype and pass."""

import json

from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import sim
from sim.algorithms.registry import REGISTRY
from sim.api import closed_form
from sim.cli import app
from sim.core.dtypes import DTYPES
from sim.machine import iomodel, mask
from sim.machine.row_sums import row_sums


@settings(max_examples=60, deadline=None)
@given(
    algorithm=st.sampled_from(list(REGISTRY)),
    n=st.integers(1, 48),
    nk=st.integers(1, 48),
    d=st.integers(1, 12),
    blocks=st.sampled_from([None, (4, 8), (7, 3), (16, 16), (1, 5)]),
    causal=st.booleans(),
    dtype=st.sampled_from(list(DTYPES)),
    heads=st.integers(1, 3),
    backward=st.booleans(),
)
def test_the_closed_form_books_what_the_simulator_books(algorithm, n, nk, d, blocks, causal, dtype, heads, backward):
    assume(not backward or REGISTRY[algorithm].backward is not None)  # an algorithm may come without a backward
    Br, Bc = blocks or (None, None)
    options = dict(n=n, nk=nk, d=d, heads=heads, dtype=dtype, causal=causal, block_rows=Br, block_cols=Bc,
                   sram_bytes=1 << 20)  # fmt: skip
    simulated = (sim.count_backward if backward else sim.count)(algorithm, **options)
    counted = (closed_form.backward if backward else closed_form.forward)(algorithm, **options)
    fields = ("hbm_read_bytes", "hbm_write_bytes", "flops", "exps", "elementwise", "block_rows", "block_cols")
    assert [getattr(counted, f) for f in fields] == [getattr(simulated, f) for f in fields]
    # the footprint of the blocks: what the listing holds at its peak (less only where a causal flash2 skips the
    # tiles of every full Q block, leaving a ragged one at the peak)
    assert counted.sram_peak_bytes >= simulated.sram_peak_bytes
    if not causal:
        assert counted.sram_peak_bytes == simulated.sram_peak_bytes


def test_the_command_prints_the_same_counts_as_a_full_run():
    runner = CliRunner()
    args = ["run", "--algo", "flash1", "--n", "300", "--nk", "200", "--d", "24", "--heads", "2", "--causal",
            "--backward", "--json"]  # fmt: skip
    full = json.loads(runner.invoke(app, args).stdout)
    counted = json.loads(runner.invoke(app, [*args, "--counts-only"]).stdout)
    assert (full["source"], counted["source"]) == ("simulated", "closed form")
    for key in ("hbm_read_bytes", "hbm_write_bytes", "flops", "exps", "sram_peak_bytes", "block_rows", "block_cols"):
        assert counted[key] == full[key], key
    for key in ("hbm_read_bytes", "hbm_write_bytes", "flops", "exps", "elementwise", "block_rows", "block_cols"):
        assert counted["backward"][key] == full["backward"][key], key
    assert counted["forward_backward"] == full["forward_backward"]
    assert counted["max_abs_err"] is None and full["max_abs_err"] > 0


def test_a_million_rows_are_counted_without_arrays():
    """N = 1,000,000, what no simulation here could hold: DESIGN.md's formulas, written out, for its blocks."""
    N, d, s, f = 10**6, 64, 2, 4
    want = {
        "standard": lambda Br, Bc: (s * (N * d + 2 * N * d + 2 * N * N), s * (2 * N * N + N * d)),
        "flash1": lambda Br, Bc: (
            s * (2 * N * d + -(-N // Bc) * 2 * N * d) + f * -(-N // Bc) * 2 * N,
            s * N * d + f * 2 * N + -(-N // Bc) * (s * N * d + f * 2 * N),
        ),
        "flash2": lambda Br, Bc: (s * (N * d + -(-N // Br) * 2 * N * d), s * N * d + f * N),
    }
    for algorithm, formula in want.items():
        r = closed_form.forward(algorithm, n=N, d=d)
        assert r.output is None and r.flops == 4 * N * N * d
        assert (r.hbm_read_bytes, r.hbm_write_bytes) == formula(r.block_rows, r.block_cols)


def brute_sums(N, Nk, Br, Bc, causal):
    """Σ over row blocks of (seen, keys, full) and of rows × each, and the rows of the blocks that see some key, from
    the mask's definition, key by key: row r sees key c ≤ r + Nk − N (causal)."""
    return brute_rule_sums(N, 1, Nk, Br, Bc, None, 0 if causal else None)


@settings(max_examples=300, deadline=None)
@given(N=st.integers(1, 90), Nk=st.integers(1, 90), Br=st.integers(1, 20), Bc=st.integers(1, 20), causal=st.booleans())
def test_the_row_block_sums_are_the_masks(N, Nk, Br, Bc, causal):
    r = row_sums(N, Nk, Br, Bc, causal)
    assert [r.seen, r.keys, r.full, r.r_seen, r.r_keys, r.r_full, r.r_any] == brute_sums(N, Nk, Br, Bc, causal)


def brute_rule_sums(positions, g, Nk, Br, Bc, left, right):
    """brute_sums under a window (left, right; None unbounded) and GQA's packed rows, from the definition: row r is
    position p = r // g, which sees key c iff p + Nk − positions − left ≤ c ≤ p + Nk − positions + right."""
    N, Tc = g * positions, -(-Nk // Bc)

    def sees(r, c):
        diagonal = r // g + Nk - positions
        return (left is None or c >= diagonal - left) and (right is None or c <= diagonal + right)

    sums = [0] * 7
    for r0 in range(0, N, Br):
        rows = range(r0, min(r0 + Br, N))
        blocks = [range(j * Bc, min((j + 1) * Bc, Nk)) for j in range(Tc)]
        seen = [b for b in blocks if any(sees(r, c) for r in rows for c in b)]
        full = [b for b in blocks if all(sees(r, c) for r in rows for c in b)]
        x = (len(seen), sum(map(len, seen)), sum(map(len, full)))
        for k in range(3):
            sums[k] += x[k]
            sums[3 + k] += len(rows) * x[k]
        sums[6] += len(rows) if seen else 0
    return sums


side = st.one_of(st.none(), st.integers(0, 12))


@settings(max_examples=300, deadline=None)
@given(positions=st.integers(1, 30), g=st.integers(1, 40), Nk=st.integers(1, 60), Br=st.integers(1, 20),
       Bc=st.integers(1, 20), left=side, right=side)  # fmt: skip
def test_the_row_block_sums_under_a_window_and_packed_rows_are_the_masks(positions, g, Nk, Br, Bc, left, right):
    """iomodel.sums steps over a run of whole blocks inside one position at once (GQA's g ≥ Br): the same sums as
    the mask's definition, key by key."""
    rule = mask.Rule(positions, Nk, left, right, g)
    r = iomodel.sums(g * positions, Nk, Br, Bc, False, rule)
    assert [r.seen, r.keys, r.full, r.r_seen, r.r_keys, r.r_full, r.r_any] == brute_rule_sums(
        positions, g, Nk, Br, Bc, left, right
    )


def test_a_million_packed_heads_sum_in_steps_of_positions():
    """g = 10⁶ query heads on one K/V head, N = Nk = 1000 causal, Br = Bc = 64: 15.6 million row blocks (g is 15,625
    blocks a position: none straddles two), summed in one step a position. By hand: position p sees keys 0 … p, so
    its blocks see ⌈(p + 1)/64⌉ K/V blocks, min(64·⌈(p + 1)/64⌉, N) keys; over its g rows: Σ_p g·(each)."""
    g, N = 10**6, 1000
    r = iomodel.sums(g * N, N, 64, 64, True, mask.rule(N, N, causal=True, group=g))
    assert r.r_keys == sum(g * min(64 * ((p + 64) // 64), N) for p in range(N))
    assert r.r_seen == sum(g * ((p + 64) // 64) for p in range(N))


def test_counting_never_walks_the_row_blocks(monkeypatch):
    """Issue 21 item 2: `--counts-only` is O(1) in N; with the per-block walk gone, N = 7.7·10⁸ is counted: Q and O
    once, K and V once per Q block (DESIGN.md); causal, with Br = Bc = B dividing N, Q block i sees i + 1 blocks."""
    monkeypatch.setattr(iomodel, "row_blocks", None)  # any walk over the row blocks would now fail
    N, d, s, f = 770_000_000, 64, 2, 4
    for causal in (False, True):
        args = ["run", "--n", str(N), "--counts-only", "--json", "--backward", *["--causal"] * causal]
        out = CliRunner().invoke(app, args)
        assert out.exit_code == 0, out.output
        r = json.loads(out.stdout)
        B, Tr = r["block_rows"], N // r["block_rows"]
        assert r["block_cols"] == B and Tr * B == N
        blocks_read = Tr * (Tr + 1) // 2 if causal else Tr * Tr  # K/V blocks read, over all Q blocks
        assert r["hbm_read_bytes"] == s * N * d + 2 * s * blocks_read * B * d
        assert r["hbm_write_bytes"] == s * N * d + f * N
        assert r["flops"] == 4 * blocks_read * B * B * d
