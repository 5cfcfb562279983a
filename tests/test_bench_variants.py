"""`python -m gpu.lab.bench_variants`' packed batch (no GPU needed): lengths spaced evenly from the longest N down to
N/2 (a 2× spread), about the bench's 16k tokens and never fewer than four sequences, so that every row pads by 4/3."""

import pytest

from gpu.lab.bench_variants import MIN_SEQUENCES, TOKENS, spread_lengths

# by hand: count = max(4, round(16384 / (0.75 N))) — 5.3 → 5 at 4096, 2.7 → 3 and 1.3 → 1 above, raised to 4 —
# then N − i · (N/2) / (count − 1)
SPACED = {
    4096: [4096, 3584, 3072, 2560, 2048],
    8192: [8192, 6827, 5461, 4096],  # 4096/3 = 1365.33 a step
    16384: [16384, 13653, 10923, 8192],  # 8192/3 = 2730.67 a step
}


@pytest.mark.parametrize("n", sorted(SPACED))
def test_a_packed_batch_spreads_its_lengths_2x_over_at_least_four_sequences(n):
    lengths = spread_lengths(n)
    assert lengths == SPACED[n]
    assert len(lengths) >= MIN_SEQUENCES and max(lengths) == 2 * min(lengths) == n
    assert len(lengths) * n / sum(lengths) == pytest.approx(4 / 3, abs=1e-4)  # what padding to the longest costs
    assert TOKENS == 16384


# `flashsim bench gpu --variants`: what the command hands the bench, and the flags it cannot honour (no GPU needed:
# gpu.lab.bench_variants.run_bench is replaced by one that records its arguments and reports two rows)


def _fake_bench(monkeypatch):
    from gpu.lab import bench_variants

    calls = []

    def run_bench(ns, *, backward, progress, command):
        calls.append({"ns": ns, "backward": backward, "command": command})
        for line in ("row one", "row two"):
            progress(line)
        return {"kind": "bench-variants", "rows": [{"variant": "gqa 8"}]}

    monkeypatch.setattr(bench_variants, "run_bench", run_bench)
    return calls


@pytest.mark.parametrize(
    ("args", "ns", "backward"),
    [([], (4096, 8192), False), (["--quick"], (4096,), False), (["--backward"], (4096, 8192), True)],
)
def test_bench_gpu_variants_hands_on_quick_and_backward_and_prints_each_row(monkeypatch, args, ns, backward):
    from click.testing import CliRunner

    from sim.cli import app

    calls = _fake_bench(monkeypatch)
    result = CliRunner().invoke(app, ["bench", "gpu", "--variants", *args])
    assert result.exit_code == 0, result.output
    assert calls == [{"ns": ns, "backward": backward, "command": calls[0]["command"]}]  # the command: sys.argv's
    assert result.stdout.splitlines() == ["row one", "row two"]


def test_bench_gpu_variants_json_on_stdout_keeps_the_rows_on_stderr(monkeypatch):
    import json

    from click.testing import CliRunner

    from sim.cli import app

    _fake_bench(monkeypatch)
    result = CliRunner().invoke(app, ["bench", "gpu", "--variants", "--json", "-"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rows"] == [{"variant": "gqa 8"}]
    assert result.stderr.splitlines() == ["row one", "row two"]
