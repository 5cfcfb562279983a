"""The trace viewer's totals below HBM: the predicted DRAM bytes and the time with its bound, as `flashsim run`."""

import io
import json

import numpy as np
from click.testing import CliRunner
from rich.console import Console

from sim.cli import app
from sim.viewer import traces
from sim.viz.panels import traffic_panel
from sim.viz.timeline import Timeline

N, D = 256, 64


def _timeline(**options) -> Timeline:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((N, D)).astype(np.float16) for _ in range(3))
    return Timeline(traces.record("flash2", q, k, v, block_rows=64, block_cols=64, **options))


def _shown(panel) -> str:
    console = Console(width=110, record=True, file=io.StringIO())
    console.print(panel)
    return console.export_text()


def test_the_traffic_panel_adds_the_dram_the_l2_leaves_and_the_time():
    t = _timeline(hardware="H100-SXM")
    shown = _shown(traffic_panel(t, len(t) - 1, 110))
    # one head of N = 256, d = 64, fp16 fits the 25 MiB L2: DRAM supplies Q, K and V once (3 × 256 × 64 × 2 bytes),
    # though Theorem 2 counts K and V once per Q block (4); O and L (256 × 64 × 2 + 256 × 4) are written back
    row = next(line for line in shown.splitlines() if "DRAM, predicted" in line)
    assert row.split()[3:7] == ["98,304", "B", "33,792", "B"]
    # the same figures `flashsim run` prints for the run (one head, the same blocks)
    args = ["run", "--algo", "flash2", "--n", str(N), "--d", str(D), "--hardware", "H100-SXM", "--block-rows", "64",
            "--block-cols", "64", "--counts-only", "--json"]  # fmt: skip
    m = json.loads(CliRunner().invoke(app, args).stdout)["machine"]
    assert m["dram_read_bytes"] == 98_304
    title = shown.splitlines()[0]
    assert (
        m["seconds"] < 1e-3
        and f"Traffic · predicted {m['seconds'] * 1e6:.3g} µs on H100-SXM, bound: {m['bound']} " in title
    )


def test_no_prediction_without_a_known_hardware_or_on_a_short_terminal():
    t = _timeline(hardware="H100-SXM")
    for panel in (traffic_panel(t, len(t) - 1, 110, compact=True), traffic_panel(t, len(t) - 1, 110, machine=False)):
        assert "predicted" not in _shown(panel)
    t.trace.config["hardware"] = "a GPU nobody made"
    t._prediction = t._predict()
    assert t.prediction() is None
    assert "DRAM, predicted" not in _shown(traffic_panel(t, len(t) - 1, 110))


def test_the_traffic_panel_counts_bytes_moved_in_decimal_units():  # the README's units: traffic as the paper writes it
    n, d, s, block = 1024, 64, 2, 64
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float16) for _ in range(3))
    t = Timeline(traces.record("flash2", q, k, v, block_rows=block, block_cols=block))
    shown = " ".join(_shown(traffic_panel(t, len(t) - 1, 110, machine=False)).split())
    kv = (n // block) * s * n * d  # K (and V) once per Q block: 16 × 131,072 bytes
    reads, writes = s * n * d + 2 * kv, s * n * d + 4 * n  # Q once and K, V; O and the float32 L
    assert f"│ K {kv / 1e6:.2f} MB 0 B │" in shown and kv / 1e6 == 2.097152  # exact_bytes would say 2.00 MiB
    assert "│ Q 131,072 B 0 B │" in shown  # exact below 10⁶ bytes
    assert f"│ total {reads / 1e6:.2f} MB {writes:,} B │" in shown and (reads, writes) == (4_325_376, 135_168)
