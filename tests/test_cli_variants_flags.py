"""`flashsim bench gpu --variants` and `flashsim compare --variants` run their own fixed sets of cases: every other
option given with them is refused in one line (exit 2) naming it, never dropped without a word, and each case's line
is printed as it is measured. No GPU needed: the GPU work is replaced by recorders."""

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import app

# options each command has but --variants cannot honour, with a value a user might give
BENCH_REFUSED = [["--kernel", "3"], ["--kernel", "6"], ["--markdown", "table.md"]]
COMPARE_REFUSED = [["--n", "64"], ["--nk", "300"], ["--batch", "2"], ["--heads", "4"], ["--dtype", "bf16"],
                   ["--causal"], ["--kernel", "7"], ["--no-counters"]]  # fmt: skip


@pytest.fixture
def recorders(monkeypatch):
    from gpu.lab import bench_variants, compare_variants

    calls = []

    def run_bench(ns, *, backward, progress, command):
        calls.append(("bench", ns, backward))
        progress("bench row")
        return {"kind": "bench-variants", "rows": []}

    def run_compare(ds, *, direction, progress, command):
        calls.append(("compare", ds, direction))
        for line in ("d=64 gqa 8: read ×1.000, write ×1.000", "d=64 softcap: read ×1.001, write ×1.000"):
            progress(line)
        return {"kind": "compare-variants", "rows": [{"case": "gqa 8"}]}

    monkeypatch.setattr(bench_variants, "run_bench", run_bench)
    monkeypatch.setattr(compare_variants, "run_compare", run_compare)
    return calls


@settings(deadline=None, max_examples=25)
@given(st.sampled_from([(["bench", "gpu"], o) for o in BENCH_REFUSED] + [(["compare"], o) for o in COMPARE_REFUSED]),
       st.booleans())  # fmt: skip
def test_an_option_variants_cannot_honour_is_refused_in_one_line(case, before):
    command, option = case
    args = [*command, *option, "--variants"] if before else [*command, "--variants", *option]
    result = CliRunner().invoke(app, args)  # (no recorder: a refusal comes before any GPU work)
    assert result.exit_code == 2, result.output
    why = ("they time the public call, as lines or --json" if command[0] == "bench"
           else "its cases are its own, at N = 4096; it takes --d, --backward and --json")  # fmt: skip
    assert result.stderr == f"error: flashsim {' '.join(command)}: {option[0]}: not with --variants ({why})\n"
    assert result.stdout == ""


def test_compare_variants_takes_d_and_prints_each_case_as_measured(recorders):
    result = CliRunner().invoke(app, ["compare", "--variants", "--d", "128", "--quiet"])
    assert result.exit_code == 0, result.output
    assert recorders == [("compare", (128,), "forward")]
    lines = ["d=64 gqa 8: read ×1.000, write ×1.000", "d=64 softcap: read ×1.001, write ×1.000"]
    assert result.stdout.splitlines() == lines


def test_compare_variants_json_on_stdout_keeps_the_lines_on_stderr(recorders):
    result = CliRunner().invoke(app, ["compare", "--variants", "--json", "-"])
    assert result.exit_code == 0, result.output
    assert recorders == [("compare", (64,), "forward")]  # --d's default
    assert json.loads(result.stdout)["rows"] == [{"case": "gqa 8"}]
    assert len(result.stderr.splitlines()) == 2


def test_compare_variants_backward_reaches_the_comparison(recorders):
    result = CliRunner().invoke(app, ["compare", "--variants", "--backward", "--d", "64", "--quiet"])
    assert result.exit_code == 0, result.output
    assert recorders == [("compare", (64,), "backward")]
