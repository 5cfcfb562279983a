"""`flashsim bench sim`'s library side: what it times, and the memory probe in a fresh process (no times asserted)."""

import sys

import numpy as np
import pytest

from sim.algorithms import registry
from sim.algorithms.registry import REGISTRY
from sim.lab import bench
from sim.machine.hardware import A100_40GB


def test_numpy_baseline_is_attention():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((12, 4)).astype(np.float16) for _ in range(3))
    s = q.astype(np.float64) @ k.astype(np.float64).T / 2
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ v.astype(np.float64)
    assert np.allclose(bench.numpy_attention(q, k, v), want, atol=1e-5)  # float32 arithmetic on 12 terms


def test_bench_sim_times_every_registered_algorithm():
    report = bench.bench_sim(n=64, d=8, repeats=1, memory_n=None)
    assert [row["algorithm"] for row in report["rows"]] == list(REGISTRY)
    for row in report["rows"]:
        assert (row["block_rows"], row["block_cols"]) == registry.fit(
            row["algorithm"], 64, 64, 8, 2, A100_40GB.sram_bytes
        )
    assert report["memory"] is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the probe reads Linux's peak resident memory")
def test_memory_probe_runs_flash2_in_a_fresh_process():
    probe = bench.memory_probe(256, 16, "fp16")
    assert (probe["n"], probe["d"]) == (256, 16)
    assert (probe["block_rows"], probe["block_cols"]) == registry.fit("flash2", 256, 256, 16, 2, A100_40GB.sram_bytes)
    assert probe["n_by_n_float32_bytes"] == 4 * 256 * 256
    assert probe["peak_rss_bytes"] >= probe["rss_before_run_bytes"] > 0


def test_the_calls_are_timed_in_interleaved_rounds_after_a_warm_up():
    """Each round calls every function once, in turn, so that a change in load falls on all of them alike."""
    log, advanced = [], []
    calls = {name: (lambda name=name: log.append(name)) for name in ("numpy", "standard", "flash2")}
    medians = bench.interleaved_medians(calls, 3, advanced.append)
    assert log == ["numpy", "standard", "flash2"] * 4 and len(advanced) == 12 and list(medians) == list(calls)
    assert bench.bench_sim_calls(3, None) == len(REGISTRY) + 4 * (1 + len(REGISTRY))


def test_bench_cli_times_counts_only_at_both_sizes_every_algorithm_both_passes():
    commands = bench.cli_commands(32768, 64)
    assert commands[0] == ["run", "--algo", "flash2", "--n", "32768", "--d", "64", "--quiet"]
    counted = {(c[2], c[4], "--backward" in c) for c in commands[1:]}
    assert all("--counts-only" in c for c in commands[1:]) and len(commands) == 1 + len(counted)
    assert counted == {(a, str(n), b) for a in REGISTRY for n in (10**8, 770_000_000) for b in (False, True)}
    assert bench.cli_commands(None, 64, (64,))[0][:5] == ["run", "--algo", "standard", "--n", "64"]
