"""`flashsim run --counts-only` with many query heads per K/V head: the packed schedule's closed form walks its g·N
rows block by block (`iomodel.sums` under GQA's packed rule), so a huge group is refused up front in one line with
its estimate, exit code 2 — `--heads 1000000 --kv-heads 1 --counts-only` once took minutes (user12's finding)."""

import time

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import app


def invoke(*args, limit=None):
    env = {"FLASHSIM_MAX_SECONDS": str(limit)} if limit else {}
    start = time.monotonic()
    out = CliRunner().invoke(app, ["run", "--counts-only", *map(str, args)], env=env)
    return out, time.monotonic() - start


def test_a_million_heads_on_one_kv_head_is_refused_at_once_naming_heads():
    out, seconds = invoke("--heads", 1_000_000, "--kv-heads", 1)
    assert out.exit_code == 2, out.output
    line = out.output.strip()
    assert "\n" not in line and line.startswith("error: --heads:") and "about" in line and "--heads " in line
    assert "packed" in line and seconds < 5


@settings(max_examples=25, deadline=None)
@given(
    heads=st.integers(1, 10**7), n=st.integers(1, 8192), one_kv_head=st.booleans(),
    extra=st.sampled_from(([], ["--pack-gqa"], ["--window", "100,0"], ["--softcap", "5"], ["--seqlens", "5,3000,77"])),
)  # fmt: skip
def test_counts_only_with_variants_answers_or_refuses_in_one_line_within_its_limit(heads, n, one_kv_head, extra):
    """Under a 2 s limit a run either answers (exit 0) or is refused in one line (exit 2); none runs long."""
    shape = [] if "--seqlens" in extra else ["--n", n]
    out, seconds = invoke("--heads", heads, "--kv-heads", 1 if one_kv_head else heads, *shape, *extra, limit=2)
    assert out.exit_code in (0, 2), out.output
    if out.exit_code == 2:
        assert out.output.startswith("error: ") and out.output.count("\n") == 1, out.output
    assert seconds < 10


def test_a_refused_run_suggests_counts_only_only_where_it_would_be_let_through():
    out = CliRunner().invoke(app, ["run", "--heads", "1000000", "--kv-heads", "1"])
    assert out.exit_code == 2 and "--counts-only" not in out.output and "--heads " in out.output, out.output
    out = CliRunner().invoke(app, ["run", "--heads", "1000", "--kv-heads", "1", "--n", "100000"])
    assert out.exit_code == 2 and "--counts-only (the closed form, at once)" in out.output, out.output
