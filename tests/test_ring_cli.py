"""`flashsim ring` as a user types it: the JSON against closed forms derived here, the viewer, one-line refusals."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import app
from sim.machine import iomodel
from sim.machine.devices import LINKS

ROOT = Path(__file__).parent.parent


def invoke(*args, code: int = 0):
    result = CliRunner().invoke(app, ["ring", *args])
    assert result.exit_code == code, result.output
    return result


def test_json_counts_every_device_and_link_as_derived_by_hand():
    N, d, P, H = 256, 16, 4, 2
    out = json.loads(invoke("--devices", str(P), "--n", str(N), "--d", str(d), "--heads", str(H), "--json").stdout)
    n, s, f = N // P, 2, 4
    Br = out["block_rows"]
    one = iomodel.flash2(n, n, d, s, Br, out["block_cols"])  # one shard against one shard, unmasked
    merge_read, merge_write = n * (f * d + f + s * d + f), f * n * (d + 1)
    reads = H * (P * (one.hbm_read_bytes + merge_read) + f * n * d)
    writes = H * (f * n * (d + 1) + P * (one.hbm_write_bytes + merge_write) + s * n * d)
    for row in out["forward"]["devices"]:
        assert row["matches"]
        assert (row["hbm_read_bytes"], row["hbm_write_bytes"]) == (reads, writes)
        assert row["link_bytes_sent"] == H * (P - 1) * 2 * n * d * s
    assert out["check"]["within"] and out["check"]["error"] <= out["check"]["bound"]
    link = LINKS["NVLink4"]
    transfers = [step["transfer_s"] for step in out["forward"]["steps"] if step["step"].startswith("ring step")]
    assert transfers == [link.latency + H * 2 * n * d * s / link.bandwidth] * (P - 1) + [0.0]
    assert out["forward"]["overlapped_s"] == pytest.approx(sum(max(x["compute_s"], x["transfer_s"])
                                                               for x in out["forward"]["steps"]))  # fmt: skip


@pytest.mark.parametrize("scheme, split", [("ring", "contiguous shards"), ("ulysses", "2 heads each")])
def test_a_batch_is_said_as_batch_times_heads_and_counted_as_batch_times_one(scheme, split):
    N, d, P, H = 64, 8, 4, 8  # Ulysses: each device takes H/P = 2 whole heads of every sequence
    args = ["--devices", P, "--n", N, "--d", d, "--heads", H, "--scheme", scheme, "--counts-only"]
    one, two = (json.loads(invoke(*map(str, args), "--batch", str(B), "--json").stdout) for B in (1, 2))
    assert (two["batch"], two["heads"]) == (2, H) and (one["batch"], one["heads"]) == (1, H)
    for a, b in zip(one["forward"]["devices"], two["forward"]["devices"], strict=True):
        assert b["closed_form"] == {name: 2 * x for name, x in a["closed_form"].items()}
    title = " ".join(invoke(*map(str, args), "--batch", "2").stdout.split()[:20])
    assert f"4 devices, {split} · N=64, d=8, batch 2 × 8 heads, fp16" in title, title


def test_one_head_is_said_in_the_singular():
    args = ["--devices", "4", "--n", "64", "--d", "8", "--counts-only"]
    ulysses = " ".join(invoke(*args, "--heads", "4", "--batch", "2", "--scheme", "ulysses").stdout.split()[:20])
    assert "4 devices, 1 head each · N=64, d=8, batch 2 × 4 heads, fp16" in ulysses, ulysses
    ring = " ".join(invoke(*args, "--heads", "1").stdout.split()[:20])
    assert "contiguous shards · N=64, d=8, 1 head, fp16" in ring, ring


def test_counts_only_gives_the_simulated_numbers_without_simulating():
    args = ["--devices", "4", "--n", "128", "--d", "8", "--causal", "--sharding", "zigzag", "--backward", "--json"]
    full, counted = (json.loads(invoke(*args, *extra).stdout) for extra in ((), ("--counts-only",)))
    assert counted["check"] is None and counted["forward"]["source"] == "closed form"
    for name in ("forward", "backward"):
        for row, closed in zip(full[name]["devices"], counted[name]["devices"], strict=True):
            assert row["matches"] and row["closed_form"] == closed["closed_form"]
        assert full[name]["steps"] == counted[name]["steps"]


def test_ulysses_sends_two_over_p_of_what_the_ring_does():
    args = ["--devices", "4", "--n", "128", "--d", "8", "--heads", "4", "--json", "--counts-only"]
    ring_, ulysses = (json.loads(invoke(*args, "--scheme", scheme).stdout) for scheme in ("ring", "ulysses"))
    sent = [[row["closed_form"]["link_bytes_sent"] for row in out["forward"]["devices"]] for out in (ring_, ulysses)]
    assert sent[0] == [2 * x for x in sent[1]]  # P / 2 = 2


def test_table_names_the_overlap_condition_and_the_verdict():
    out = invoke("--devices", "2", "--n", "64", "--d", "8", "--link", "pcie5").stdout
    assert "PCIe5" in out and "overlap needs" in out and "✓ within" in out


def test_trace_steps_through_one_device_round_the_ring():
    listing = invoke("--devices", "4", "--n", "32", "--d", "4", "--heads", "1", "--trace", "--device", "2").stdout
    assert "ring attention, device 2 of 4" in listing
    for t, shard in enumerate((2, 1, 0, 3)):  # device 2 holds shard 2 − t at step t
        assert f"ring step {t}: K/V shard {shard}" in listing
    assert "Send K_in, V_in (shard 2) to device 3 and receive shard 1's from device 1" in listing
    screen = invoke("--devices", "2", "--n", "16", "--d", "4", "--heads", "1", "--trace", "--step", "3").stdout
    assert "Memory hierarchy" in screen and "FlashAttention-2 on one device" in screen


def test_a_ring_trace_is_saved_and_reopened_by_flashsim_trace(tmp_path):
    args = ("--devices", "4", "--n", "32", "--d", "4", "--heads", "1", "--trace", "--device", "2")
    path = tmp_path / "ring.json"
    said = invoke(*args, "--json", str(path)).stdout  # it once wrote nothing and opened the viewer
    printed = json.loads(invoke(*args, "--json").stdout)
    assert printed == json.loads(path.read_text()) and printed["algorithm"] == "ring attention, device 2 of 4"
    steps = len(printed["steps"])
    assert said.split() == f"wrote {path}: the trace, {steps} steps (flashsim trace --load {path} opens it)".split()
    shown = CliRunner().invoke(app, ["trace", "--load", str(path)]).stdout
    for t, shard in enumerate((2, 1, 0, 3)):  # device 2 holds shard 2 − t at step t, as traced
        assert f"ring step {t}: K/V shard {shard}" in shown


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (["--devices", "0"], "error: flashsim ring: Invalid value for '--devices'"),
        (["--devices", "9", "--n", "8"], "error: --devices: 9 devices for N = 8"),
        (["--devices", "3", "--sharding", "zigzag", "--n", "64"], "error: --sharding: zigzag cuts N = 64"),
        (["--devices", "3", "--scheme", "ulysses"], "error: --devices: Ulysses gives each device H/P"),
        (["--devices", "2", "--device", "2", "--trace"], "error: --device: 2 is not one of the 2 devices"),
        (["--step", "3"], "error: --step: shows a step of --trace"),
        (["--trace", "--counts-only"], "error: --counts-only: nothing is simulated"),
        (["--trace", "--scheme", "ulysses", "--devices", "2"], "error: --trace: follows a device round the ring"),
        (["--link", "smoke-signals"], "error: flashsim ring: Invalid value for '--link'"),
        (["--n", "100000000"], "error: --n: simulating 4 devices at N = 100,000,000"),
        # red team 87: the closed forms' P² pairs were counted (96 s at 1,000 devices) before any refusal
        (["--n", "4000", "--devices", "2000", "--counts-only"], "error: --devices: counting a ring of 2000 devices"),
        (["--n", "3000000", "--devices", "3000", "--counts-only"], "error: --devices: counting a ring of 3000"),
        (["--n", "8", "--devices", "2", "--device", "1"], "error: --device: chooses the device --trace follows"),
        (["--n", "8", "--devices", "2", "--device", "0"], "error: --device: chooses the device --trace follows"),
    ],
)
def test_bad_input_is_refused_in_one_line(args, start):
    result = CliRunner().invoke(app, ["ring", *args])
    assert result.exit_code == 2
    assert result.output.startswith(start) and result.output.count("\n") == 1, result.output


@settings(max_examples=20, deadline=None)
@given(P=st.integers(1, 9), N=st.integers(1, 40), zigzag=st.booleans())
def test_any_device_count_runs_or_is_refused_in_one_line(P, N, zigzag):
    args = ["--devices", str(P), "--n", str(N), "--d", "4", "--heads", "1", "--json"]
    result = CliRunner().invoke(app, ["ring", *args, *(["--sharding", "zigzag"] if zigzag else [])])
    if P <= N and (not zigzag or N % (2 * P) == 0):
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert len(out["forward"]["devices"]) == P and out["check"]["within"]
        assert np.isfinite(out["forward"]["overlapped_s"])
    else:
        assert result.exit_code == 2 and result.output.count("\n") == 1 and result.output.startswith("error: ")


def test_the_distributed_ring_outside_torchrun_or_without_torch_says_so_in_one_line():
    """Red team 96: `python -m sim.lab.ring_distributed` without torch was a ModuleNotFoundError traceback."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    done = subprocess.run([sys.executable, "-m", "sim.lab.ring_distributed"], capture_output=True, text=True,
                          env=env | {"PYTHONPATH": str(ROOT)}, timeout=120)  # fmt: skip
    if importlib.util.find_spec("torch") is None:
        said = "error: torch is not installed; it is the optional extra: pip install 'flashsim[distributed]'"
    else:
        said = "error: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT not set: start it with torchrun ("
    assert done.returncode == 2 and done.stderr.startswith(said) and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("sharding, causal", [("contiguous", ()), ("zigzag", ("--causal",))])
def test_a_ring_trace_of_many_heads_moves_its_own_closed_form_and_reopens(tmp_path, sharding, causal):
    """Red team 99: with 8 heads the traced head was held to every head's closed form ('Moved so far: 12%'), and a
    causal zigzag trace, saved, could not be reopened (its Q is the last piece: half the device's rows)."""
    args = ("--n", "64", "--d", "8", "--devices", "4", "--heads", "8", "--sharding", sharding, *causal, "--trace")
    path = tmp_path / "ring.json"
    invoke(*args, "--json", str(path))
    trace = json.loads(path.read_text())
    last, closed = trace["steps"][-1], trace["config"]["closed_form"]
    assert (last["hbm_read_bytes"], last["hbm_write_bytes"]) == (closed["hbm_read_bytes"], closed["hbm_write_bytes"])
    shown = CliRunner().invoke(app, ["trace", "--load", str(path), "--step", str(len(trace["steps"]) - 1)],
                               env={"COLUMNS": "200"})  # fmt: skip
    assert shown.exit_code == 0 and "Moved so far: 100%" in shown.stdout, shown.output
