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
