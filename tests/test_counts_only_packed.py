"""`flashsim run --counts-only` with many query heads per K/V head: the packed schedule's closed form sums a run of
whole row blocks inside one position in one step (`iomodel.sums`), so `--heads 1000000 --kv-heads 1 --counts-only`
answers (it once took minutes: user12's finding); what still walks too many steps (a window over a huge N) is refused
up front in one line with its estimate, exit code 2."""

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import app
from sim.machine import mask


def invoke(*args, limit=None):
    env = {"FLASHSIM_MAX_SECONDS": str(limit)} if limit else {}
    return CliRunner().invoke(app, ["run", "--counts-only", *map(str, args)], env=env)


def test_a_million_heads_on_one_kv_head_are_counted_in_steps_of_positions(monkeypatch):
    """N = 1024 causal, g = 10⁶: 8·10⁶ packed row blocks of 128 rows, but every one lies whole inside a position
    (10⁶ rows a position), so the closed form takes one step a position: N for the packed schedule."""
    steps = []
    seen_blocks = mask.Rule.seen_blocks
    monkeypatch.setattr(
        mask.Rule, "seen_blocks", lambda self, rows, Bc: steps.append(rows) or seen_blocks(self, rows, Bc)
    )
    out = invoke("--heads", 1_000_000, "--kv-heads", 1, "--causal")
    assert out.exit_code == 0, out.output
    assert "packed schedule" in out.output
    assert len(steps) <= 2 * 1024 + 1, len(steps)


def test_a_window_over_a_huge_n_is_refused_at_once_naming_its_option():
    out = invoke("--n", 10**9, "--window", "100,0")
    assert out.exit_code == 2, out.output
    line = out.output.strip()
    assert "\n" not in line and line.startswith("error: ") and "about" in line, line


@settings(max_examples=25, deadline=None)
@given(
    heads=st.integers(1, 10**7), n=st.integers(1, 8192), one_kv_head=st.booleans(),
    extra=st.sampled_from(([], ["--pack-gqa"], ["--window", "100,0"], ["--softcap", "5"], ["--seqlens", "5,3000,77"])),
)  # fmt: skip
def test_counts_only_with_variants_answers_or_refuses_in_one_line(heads, n, one_kv_head, extra):
    """Under a 2 s limit a run either answers (exit 0) or is refused in one line (exit 2)."""
    shape = [] if "--seqlens" in extra else ["--n", n]
    out = invoke("--heads", heads, "--kv-heads", 1 if one_kv_head else heads, *shape, *extra, limit=2)
    assert out.exit_code in (0, 2), out.output
    if out.exit_code == 2:
        assert out.output.startswith("error: ") and out.output.count("\n") == 1, out.output


def test_a_refused_run_suggests_counts_only_only_where_it_would_be_let_through():
    out = CliRunner().invoke(app, ["run", "--heads", "1000000", "--kv-heads", "1"])
    assert out.exit_code == 2 and "--counts-only (the closed form, at once)" in out.output, out.output
    out = CliRunner().invoke(app, ["run", "--n", "1000000000", "--window", "100,0"])
    assert out.exit_code == 2 and "--counts-only" not in out.output, out.output
