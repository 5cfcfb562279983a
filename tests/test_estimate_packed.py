"""`flashsim run` and `trace` price a packed batch (--seqlens) as `sim.run_varlen` runs it: each sequence its own
N_i × N_i tile pairs and float64 reference, not the batch padded to its longest sequence (session 25's leftover:
`--seqlens 32768,64,64,64` was priced as four 32K sequences)."""

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.cli import app, estimate, packed
from sim.core.errors import InputError
from tests.cli_runner import error_line, flashsim

# `python -m sim.cli run --seqlens … --quiet` timed with `time` on this project's 2-core machine (shared), the
# slower of two runs: what the estimate refuses by must not be below it, nor past the model's ~1.9× above it
MEASURED = {
    ("--seqlens", "8192,64,64,64"): 2.66,
    ("--seqlens", "16384,16,16,16"): 9.38,
    ("--seqlens", "8192,8192,8192,64", "--causal"): 5.43,
    ("--seqlens", "8192,1000,3000,500,64"): 2.67,
}


def priced(monkeypatch, *args) -> tuple[estimate.Estimate, str, list[str]]:
    """The estimate a command refuses by (and what it would name, and its hints), nothing run."""
    seen = []

    def guard(ctx, cost, what, hints, small_blocks=False, limit=estimate.LIMIT_SECONDS, option=None, **sizes):
        seen.append((cost(**sizes), what, hints))
        raise InputError("priced")

    monkeypatch.setattr(estimate, "guard", guard)
    out = CliRunner().invoke(app, [str(a) for a in args])
    assert out.exit_code == 2 and seen, out.output
    return seen[0]


@pytest.mark.parametrize("extra", [(), ("--causal",), ("--window", "100,0"), ("--backward", "--heads", "2")])
def test_a_packed_batch_costs_its_longest_sequence_and_the_short_ones_not_four_long_ones(monkeypatch, extra):
    packed, _, _ = priced(monkeypatch, "run", "--seqlens", "2048,64,64,64", *extra)
    long, _, _ = priced(monkeypatch, "run", "--n", 2048, *extra)
    short, _, _ = priced(monkeypatch, "run", "--n", 64, "--batch", 3, *extra)
    closed = estimate.counting().seconds  # the closed forms, evaluated once for the packed run
    assert packed.seconds == pytest.approx(long.seconds + short.seconds - closed, rel=1e-9)
    assert packed.held == long.held + short.held - estimate.PROCESS  # every sequence's tensors; the process once


@pytest.mark.parametrize("args", sorted(MEASURED))
def test_the_estimate_of_a_packed_run_is_near_its_measured_time(monkeypatch, args):
    est, _, _ = priced(monkeypatch, "run", *args)
    assert MEASURED[args] <= est.seconds <= 2 * MEASURED[args], est.seconds


def test_a_packed_batch_the_padded_price_refused_now_runs(monkeypatch):
    """At a limit of twice one N = 1,024 run, 1,024 and seven of 16 fit; priced padded, they were eight of 1,024."""
    one, _, _ = priced(monkeypatch, "run", "--n", 1024)
    monkeypatch.undo()
    monkeypatch.setenv("FLASHSIM_MAX_SECONDS", str(2 * one.seconds))
    out = flashsim("run", "--seqlens", "1024," + ",".join(["16"] * 7), "--json")
    assert '"padded_hbm_bytes"' in out.stdout


def test_a_packed_batch_too_large_is_refused_in_one_line_naming_it_with_hints():
    line = error_line(flashsim("run", "--seqlens", "32768,32768", code=2))
    assert line.startswith("error: --seqlens: flash2 at a packed batch of 2 sequences, 65,536 rows"), line
    assert "(the longest N = 32,768)" in line and "would take about" in line, line
    assert line.endswith("try --counts-only (the closed form, at once) or fewer or shorter sequences in --seqlens")
    assert "at a packed batch of 1 sequence, 100,000 rows" in error_line(flashsim("run", "--seqlens", 100_000, code=2))


def test_trace_records_a_packed_batch_s_first_sequence_and_runs_the_rest(monkeypatch):
    """--seqlens 16,2048 on the toy part was refused for 396,288 steps: the trace records sequence 0's 16 rows."""
    toy = ("--hardware", "toy", "--block-rows", 8, "--block-cols", 8)
    est, what, hints = priced(monkeypatch, "trace", "--seqlens", "16,2048", *toy)
    assert est.steps == estimate.trace_steps(16, 16, 8, 8)
    assert (
        "a packed batch of 2 sequences, 2,064 rows" in what and hints[-1] == "fewer or shorter sequences in --seqlens"
    )
    long, _, _ = priced(monkeypatch, "trace", "--n", 2048, *toy)
    short, _, _ = priced(monkeypatch, "trace", "--n", 16, *toy)
    listing = long.seconds - long.steps * estimate.PER_STEP + short.seconds  # both run; one is recorded
    assert est.seconds == pytest.approx(listing, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(
    lengths=st.lists(st.sampled_from([0, -3, 1, 77, 10**9, 2**53, 2**53 + 1]), min_size=1, max_size=4),
    many=st.sampled_from([1, 1000, 100_000]), command=st.sampled_from(["run", "trace"]),
    extra=st.sampled_from([(), ("--window", "5,0"), ("--counts-only",), ("--causal", "--heads", "3")]),
)  # fmt: skip
@example(lengths=[2**53], many=1, command="run", extra=("--window", "5,0"))  # walked 7·10¹³ row blocks
@example(lengths=[1, 77, 10**9], many=100_000, command="trace", extra=("--window", "5,0"))
def test_hostile_seqlens_answer_or_are_refused_in_one_line(lengths, many, command, extra):
    """0, negative, past 2⁵³, 10⁹, 10⁵ entries, sums past 10²⁰: under a 2 s limit, exit 0 or one line and exit 2."""
    if command == "trace" and "--counts-only" in extra:
        extra = ()
    seqlens = ",".join(str(m) for m in (lengths * many)[:100_000])
    out = CliRunner().invoke(app, [command, "--seqlens", seqlens, *extra], env={"FLASHSIM_MAX_SECONDS": "2"})
    assert out.exit_code in (0, 2), (out.output, out.exception)
    if out.exit_code == 2:
        error_line(out)


def test_many_distinct_lengths_are_priced_rounded_up_a_few_percent_in_few_steps(monkeypatch):
    lengths = range(1, 100_001)
    seqs = packed.sequences(lengths, 0, 0, 0)
    assert len(seqs) < 500 and sum(seqs.values()) == len(lengths)  # ~32 lengths an octave, every sequence counted
    assert all(m <= packed.round_up(m) <= 1.032 * m for m in lengths)
    assert packed.sequences([5, 7, 5], 0, 0, 0) == {(5, 5): 2, (7, 7): 1}  # few: as they are
    calls = []
    listing = estimate.listing
    monkeypatch.setattr(estimate, "listing", lambda *a, **k: calls.append(a) or listing(*a, **k))
    out = CliRunner().invoke(app, ["run", "--seqlens", ",".join(map(str, lengths)), "--heads", "1000"])
    assert "error: --heads: flash2 at a packed batch of 100,000 sequences, 5,000,050,000 rows" in error_line(out)
    assert len(calls) < 100 * len(seqs)  # the hint's search over --heads included
