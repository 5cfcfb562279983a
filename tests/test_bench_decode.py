"""`flashsim bench decode`'s graph columns without a GPU: gpu.lab.bench_decode._graphs with the capture and replay
of gpu.lab.timing replaced by fakes that hand back chosen µs per step, checked against the row's fields worked by
hand (ours, SDPA's default and cuDNN over the step's bytes; the plain read over the K/V bytes it reads; the ratios),
and the recorded run's rows against their own bytes."""

import json
from pathlib import Path

import pytest

from gpu.lab import bench_decode

RESULTS = Path(__file__).parent.parent / "gpu" / "lab" / "results"
H100 = {"bytes_per_s": 3.35e12, "of": "H100-SXM"}  # the H100 SXM datasheet's 3.35 TB/s


@pytest.fixture
def fake_graphs(monkeypatch):
    """Captures record their names; replay_us answers µs per step by name; capture_torch of `refused` raises."""
    captured, refused = [], set()
    us = {"ours_graph": 12.0, "read_graph": 8.0, "default_graph": 13.2, "cudnn_graph": 13.5}

    def capture_cupy(fn, warmup):
        captured.append(fn)
        return (lambda s: None), None

    def capture_torch(fn, warmup):
        if fn in refused:
            raise RuntimeError("capture refused\nsecond line")
        captured.append(fn)
        return (lambda s: None), None

    monkeypatch.setattr(bench_decode.timing, "capture_cupy", capture_cupy)
    monkeypatch.setattr(bench_decode.timing, "capture_torch", capture_torch)
    monkeypatch.setattr(bench_decode.timing, "replay_us", lambda graphs, torch_stream: {n: us[n] for n in graphs})
    monkeypatch.setattr(bench_decode, "read_call", lambda cupy, caches: "read")
    return us, refused


def test_graph_columns_worked_by_hand(fake_graphs):
    moved, kv = 16_809_984, 16_777_216  # B 1 Nk 4K: K and V (2·8·4096·128·2 bytes), q and o (2·64·128·2)
    ok = {"contiguous": "ours", "default": "default", "cudnn": "cudnn"}
    row = bench_decode._graphs(None, [None] * 13, ok, moved, kv, H100)
    assert row["ours_graph"]["ms"] == pytest.approx(0.012)
    assert row["ours_graph"]["gbps"] == pytest.approx(moved / 12.0e-6 / 1e9)  # 1400.8 GB/s
    assert row["read_graph"]["gbps"] == pytest.approx(kv / 8.0e-6 / 1e9)  # its own bytes: K and V only
    assert row["read_graph"]["dram_pct"] == pytest.approx(100 * kv / 8.0e-6 / 3.35e12)  # 62.6%
    assert row["cudnn_graph"]["gbps"] == pytest.approx(moved / 13.5e-6 / 1e9)
    assert row["graph_over_read"] == pytest.approx(12.0 / 8.0)
    assert row["graph_speedup_vs_default"] == pytest.approx(13.2 / 12.0)


def test_a_backend_refusing_capture_is_said_not_timed(fake_graphs):
    _, refused = fake_graphs
    refused.add("cudnn")
    row = bench_decode._graphs(
        None, [None], {"contiguous": "ours", "default": "default", "cudnn": "cudnn"}, 10, 8, H100
    )
    assert row["cudnn_graph"] == {"status": "error", "why": "capture refused"}
    assert "ms" in row["default_graph"] and "ms" in row["read_graph"]


def test_without_pytorch_ours_and_the_read_still_timed(fake_graphs):
    row = bench_decode._graphs(None, [None], {"contiguous": "ours"}, 10, 8, H100)
    assert set(row) == {"ours_graph", "read_graph", "graph_over_read"}


@pytest.mark.parametrize(
    ("name", "peak"), [("NVIDIA H100 80GB HBM3", 3.35e12), ("NVIDIA H200", 4.8e12), ("NVIDIA L4", None)]
)
def test_the_share_is_of_the_device_it_ran_on(monkeypatch, fake_graphs, name, peak):
    """dram_pct is a share of the datasheet bandwidth of the GPU the bench ran on (an H200 is not judged against an
    H100's 3.35 TB/s); a GPU the simulator has no preset for gets GB/s alone."""
    monkeypatch.setattr(bench_decode.device, "properties", lambda: {"name": name})
    got = bench_decode.dram_peak()
    assert (got and got["bytes_per_s"]) == peak
    row = bench_decode._graphs(None, [None], {"contiguous": "ours"}, 10, 16_777_216, got)
    assert row["read_graph"]["dram_pct"] == (None if peak is None else pytest.approx(100 * 16_777_216 / 8e-6 / peak))
    line = bench_decode.progress_line({"batch": 1, "nk": 4096, "splits": 16, "paged_splits": 16, **row})
    assert ("read_graph 2097 GB/s" in line) and (("%)" in line) == (peak is not None))
    said = {3.35e12: "% of 3.35 TB/s (H100-SXM)", 4.8e12: "% of 4.80 TB/s (H200)", None: "no DRAM peak known"}
    assert said[peak] in bench_decode.heading(got)


def test_progress_line_names_the_read():
    row = {"batch": 1, "nk": 4096, "splits": 16, "paged_splits": 32, "graph_over_read": 1.5}
    row["read_graph"] = {"ms": 0.008, "gbps": 2097.2, "dram_pct": 62.6}
    line = bench_decode.progress_line(row)
    assert "read_graph 2097 GB/s (63%)" in line and "ours graph 1.50× the plain read" in line


@pytest.mark.parametrize(("gpu", "peak"), [("h100", 3.35e12), ("h200", 4.8e12)])
def test_the_recording_counts_its_bytes(gpu, peak):
    """Each recorded row: bytes = K and V once, q and o; every timed column's GB/s = those bytes / its time, the
    read's = the K/V bytes / its time; graph_over_read the ratio of the two graph times; the H200's dram_pct of its
    own 4.8 TB/s (the H100's, recorded before dram_peak, of 3.35 TB/s)."""
    report = json.loads((RESULTS / f"bench-decode-{gpu}.json").read_text())
    config = report["config"]
    assert len(report["rows"]) == len(bench_decode.GRID)
    for row in report["rows"]:
        kv = 2 * row["batch"] * config["kv_heads"] * row["nk"] * config["d"] * 2
        assert row["bytes"] == kv + 2 * row["batch"] * config["heads"] * config["nq"] * config["d"] * 2
        for name in ("contiguous", "paged", "ours_graph", "default_graph", "cudnn_graph", "read_graph"):
            nbytes = kv if name == "read_graph" else row["bytes"]
            assert row[name]["gbps"] == pytest.approx(nbytes / row[name]["ms"] / 1e6)
            assert row[name]["dram_pct"] == pytest.approx(100 * nbytes / row[name]["ms"] / 1e-3 / peak)
        assert row["graph_over_read"] == pytest.approx(row["ours_graph"]["ms"] / row["read_graph"]["ms"])
