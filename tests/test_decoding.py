"""Flash-Decoding: split-K/V partials combined exactly; counts equal the closed form; the SM model."""

import json
from itertools import pairwise

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.api import reference
from sim.cli import app
from sim.machine import blocks, hardware, iomodel, occupancy

A100 = hardware.get("A100-40GB")


def inputs(Nq, Nk, d, dtype=np.float32, lead=(), seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((*lead, rows, d)).astype(dtype) for rows in (Nq, Nk, Nk))


# fp32 partials and accumulation: unit roundoff 6e-8, grown by sums over at most a few hundred keys
FP32_TOL = 1e-5


@pytest.mark.parametrize(
    "Nq, Nk, d, splits, Bc, causal",
    [
        (1, 1000, 16, 7, 32, False),
        (1, 1000, 16, 7, 32, True),
        (4, 333, 8, 5, 16, True),
        (3, 50, 4, 50, 1, True),
        (6, 4, 4, 3, 2, True),
    ],
)
def test_output_and_lse_match_float64_reference(Nq, Nk, d, splits, Bc, causal):
    q, k, v = inputs(Nq, Nk, d, seed=Nk)
    r = sim.decode(q, k, v, splits=splits, block_cols=Bc, causal=causal)
    o, lse = reference.attention(q, k, v, causal=causal)
    assert np.abs(r.output - o).max() <= FP32_TOL * np.abs(o).max()
    finite = np.isfinite(lse)  # Nq > Nk, causal: the first rows see no key and get L = −∞
    assert np.array_equal(np.isfinite(r.lse), finite)
    assert np.abs(r.lse[finite] - lse[finite]).max() <= FP32_TOL * np.abs(lse[finite]).max()


def test_batched_heads_in_half_precision():
    q, k, v = inputs(2, 300, 16, np.float16, lead=(2, 3), seed=1)
    r = sim.decode(q, k, v, splits=4, causal=True)
    o, _ = reference.attention(q, k, v, causal=True)
    # the only rounding to fp16 is O's final store: u/2 = 2⁻¹² of the largest entry, with fp32 work before it
    assert np.abs(r.output.astype(np.float64) - o).max() <= 2.0**-11 * np.abs(o).max()
    assert r.heads == 6 and r.output.dtype == np.float16


def test_one_split_is_flashattention2_itself():
    q, k, v = inputs(3, 200, 8, seed=2)
    r = sim.decode(q, k, v, splits=1, block_cols=16, causal=True)
    f = sim.run("flash2", q, k, v, block_rows=3, block_cols=16, causal=True)
    assert np.array_equal(r.output, f.output) and np.array_equal(r.lse, f.lse)
    assert r.hbm_bytes == f.hbm_bytes and r.flops == f.flops


def test_splitting_changes_only_the_rounding():
    q, k, v = inputs(2, 512, 8, seed=3)
    whole = sim.decode(q, k, v, splits=1, block_cols=64)
    for P in (2, 3, 8, 64):
        split = sim.decode(q, k, v, splits=P, block_cols=64)
        assert np.abs(split.output - whole.output).max() <= FP32_TOL * np.abs(whole.output).max()


@settings(max_examples=40, deadline=None)
@given(
    Nq=st.integers(1, 6),
    Nk=st.integers(1, 60),
    d=st.integers(1, 8),
    Bc=st.integers(1, 16),
    splits=st.integers(1, 12),
    dtype=st.sampled_from([np.float16, ml_dtypes.bfloat16, np.float32]),
    causal=st.booleans(),
)
def test_ledger_equals_closed_form(Nq, Nk, d, Bc, splits, dtype, causal):
    splits = min(splits, Nk)
    q, k, v = inputs(Nq, Nk, d, dtype)
    r = sim.decode(q, k, v, splits=splits, block_cols=Bc, causal=causal, sram_bytes=1 << 30)
    c = iomodel.sum_counts(c for _, c in iomodel.decoding(Nq, Nk, d, np.dtype(dtype).itemsize, Bc, splits, causal))
    got = (
        r.ledger.hbm_read_bytes,
        r.ledger.hbm_write_bytes,
        r.flops,
        r.ledger.work["exp"],
        r.ledger.work["elementwise"],
    )
    assert got == (c.hbm_read_bytes, c.hbm_write_bytes, c.flops, c.exps, c.elementwise)
    widest = min(Bc, max(k1 - k0 for k0, k1 in blocks.chunks(Nk, splits)))  # the widest K/V tile
    assert r.sram_peak_bytes == sum(blocks.decoding_footprint(Nq, widest, d, np.dtype(dtype).itemsize, splits).values())


def test_chunks_are_even_and_cover_the_keys():
    for Nk, P in ((10, 3), (10, 10), (1000, 7), (5, 1)):
        b = blocks.chunks(Nk, P)
        assert b[0][0] == 0 and b[-1][1] == Nk and all(x[1] == y[0] for x, y in pairwise(b))
        sizes = [k1 - k0 for k0, k1 in b]
        assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_at_batch_one_one_block_per_head_leaves_most_sms_idle():
    Nk, d, s = 32768, 128, 2
    one = occupancy.occupancy(1, 16, 1, 1, Nk, d, s, A100)
    assert (one.blocks, one.busy, one.waves) == (16, 16, 1)  # 16 of 108 SMs
    P = occupancy.best_splits(1, 16, 1, Nk, d, s, A100)
    split = occupancy.occupancy(1, 16, P, 1, Nk, d, s, A100)
    assert split.busy == 108 and split.utilization > 0.9
    # the model streams a block at 1/108 of the bandwidth: 16 busy SMs move the same bytes 108/16 × slower
    assert one.seconds / split.seconds > 5


@pytest.mark.parametrize("batch, Nk, fastest", [(1, 32768, 16), (1, 131072, 16), (4, 131072, 4), (16, 32768, 1),
                                                (16, 131072, 1)])  # fmt: skip
def test_the_splits_measured_fastest_on_an_h100_are_the_models(batch, Nk, fastest):
    """gpu/NOTES.md run 37-dec3 (Hq 64, Hkv 8, d 128, fp16, the launch alone): one wave of one block per SM was
    fastest, 2–8% ahead of the 33 splits the model took before it counted a wave's fill and drain."""
    assert occupancy.best_splits(batch * 8, 1, 8, Nk, 128, 2, hardware.get("H100-SXM")) == fastest


@pytest.mark.parametrize(
    "nk, page_size, splits", [(4096, 1, 32), (4096, 256, 16), (4096, 4096, 1), (32768, 1, 33), (32768, 256, 16)]
)
def test_a_paged_cache_splits_at_most_its_pages(nk, page_size, splits):
    """A paged split is a run of whole pages, so at most ⌈Nk / page_size⌉ splits hold keys (sim.api.paged and the
    kernel take min(splits, pages)). B 1, Hkv 8, g 8, d 128, fp16 on the H100 preset: pages of one key (each row finds
    its page: two blocks an SM, no cap below 128) give the paged rule's 32 at Nk 4K and 33 at 32K (the bench's
    recording of run 41-dec6, where at Nk 4K half the 32 blocks of a group were empty); pages of 256 (whole 64-key
    tiles: one block an SM, as a contiguous cache) cap Nk 4K at its 16 pages, the contiguous rule's own 16; one page,
    one split; at Nk 32K the 128 pages do not bind and the contiguous rule's 16 stands."""
    assert occupancy.best_splits(8, 1, 8, nk, 128, 2, hardware.get("H100-SXM"), page_size=page_size) == splits


@pytest.mark.parametrize(("page_size", "per_sm"), [(0, 1), (64, 1), (256, 1), (4096, 1), (1, 2), (16, 2), (100, 2)])
def test_pages_of_whole_tiles_stream_as_a_contiguous_cache(page_size, per_sm):
    """Rung 8 reads a 64-key tile of a page of whole tiles as one strided run (run 43-dec8), else row by row."""
    assert occupancy.blocks_per_sm(page_size) == per_sm


@pytest.mark.parametrize(
    ("batch", "nk", "page_size", "tried", "fastest"),
    [(1, 32768, 256, (8, 16, 33), 16), (4, 16384, 256, (2, 4, 8), 4), (16, 4096, 256, (1, 2, 3), 1),
     (16, 32768, 256, (1, 2), 1), (4, 16384, 16, (4, 8), 8), (1, 32768, 16, (16, 33), 33), (16, 4096, 16, (1, 2), 2)],
)  # fmt: skip
def test_the_paged_splits_measured_fastest_on_an_h100_are_the_models(batch, nk, page_size, tried, fastest):
    """gpu/NOTES.md run 45 (CUDA graph steps; Hq 64, Hkv 8, d 128, fp16, pages under a shuffled table): of the split
    counts tried, the fastest. Pages of 256 at one block an SM were 1–5% faster than at two (the rule before took
    33, 8, 2, 2 here); pages of 16 at one block an SM 1.34–1.46× slower."""
    P = occupancy.best_splits(batch * 8, 1, 8, nk, 128, 2, hardware.get("H100-SXM"), page_size=page_size)
    assert P in tried and P == fastest


def test_at_large_batch_splitting_gains_little():
    Nk, d, s = 4096, 128, 2
    one = occupancy.occupancy(64, 16, 1, 1, Nk, d, s, A100)
    best = occupancy.occupancy(64, 16, occupancy.best_splits(64, 16, 1, Nk, d, s, A100), 1, Nk, d, s, A100)
    assert one.busy == 108 and one.utilization > 0.9  # 1024 blocks already fill every SM
    assert one.seconds / best.seconds < 1.1


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        (dict(splits=0), "splits:"),
        (dict(splits=11), "splits:"),
        (dict(block_cols=0), "block_cols:"),
        (dict(record="x"), "record:"),
    ],
)
def test_bad_input_is_one_line_naming_the_argument(kwargs, argument):
    q, k, v = inputs(2, 10, 4)
    with pytest.raises(sim.InputError) as e:
        sim.decode(q, k, v, **kwargs)
    assert str(e.value).startswith(argument) and "\n" not in str(e.value)


def test_cli_shows_the_sms_each_choice_keeps_busy():
    result = CliRunner().invoke(app, ["decode", "--nk", "8192", "--batch", "1", "--heads", "16", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    rows = {r["splits"]: r for r in out["rows"]}
    assert rows[1]["busy_sms"] == 16 and rows[1]["blocks"] == 16
    # 6 splits of 16 heads: 96 blocks, one wave on 108 SMs; 7 would need a second wave and its fill and drain
    assert out["best_splits"] == 6 and rows[6]["busy_sms"] == 96
    assert rows[out["best_splits"]]["seconds"] < rows[1]["seconds"] / 5
    assert out["simulated_max_abs_err"] < 2.0**-11 * 4  # one fp16 rounding of O, whose entries are below 4


def test_cli_bad_splits_is_one_line_with_exit_code_2():
    result = CliRunner().invoke(app, ["decode", "--nk", "10", "--splits", "4,20"])
    assert result.exit_code == 2 and result.output.strip().startswith("error: --splits")


def test_cli_says_one_split_and_pages_of_one_key_in_the_singular():
    result = CliRunner().invoke(app, ["decode", "--nk", "4", "--heads", "108", "--page-size", "1"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "one head simulated in 1 split: max |O − ref|" in text and "pages of 1 key (4 pages, 1 split," in text


def test_cli_refusal_names_nk_decode_has_no_n():
    refused = CliRunner().invoke(app, ["decode"], env={"FLASHSIM_MAX_SECONDS": "0.001"})
    assert refused.exit_code == 2 and refused.stderr.startswith("error: --nk: Flash-Decoding of 1 query row")
