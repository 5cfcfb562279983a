"""What the audit of issue 21's items found without a test (item numbers as the issue gives them): a read-only
folder, the out-of-memory hint, memory refusals in binary units and traffic in decimal ones, --quiet on the long
commands, bench sim's and bench cli's progress bars, and the issue's own reproductions of item 1."""

import json
import os
import re

import pytest

import sim
from sim.algorithms.registry import REGISTRY
from sim.cli import estimate
from sim.core import atomic_file
from tests.cli_runner import error_line, flashsim
from tests.test_cli_round2 import commands, process


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_folder_is_one_line_and_exit_2(tmp_path):  # item 3
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o555)
    result = process("run", "--n", 64, "--json", folder / "out.json")
    assert result.returncode == 2 and b"Traceback" not in result.stderr
    assert result.stderr.decode() == f"error: {folder / 'out.json'}: Permission denied\n" and os.listdir(folder) == []


def test_a_read_only_folder_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):  # item 3, as root too
    path = tmp_path / "out.json"
    path.write_text("the old report")

    def mkstemp(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path))

    monkeypatch.setattr(atomic_file.tempfile, "mkstemp", mkstemp)
    line = error_line(flashsim("run", "--n", 64, "--json", path, code=2))
    assert "Permission denied" in line and path.read_text() == "the old report" and os.listdir(tmp_path) == ["out.json"]


def test_out_of_memory_suggests_counts_only_only_to_a_run_that_is_not(monkeypatch):  # item 13
    from sim.api import closed_form

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(closed_form, "forward", exhausted)
    monkeypatch.setattr(sim, "run", exhausted)
    counting = error_line(flashsim("run", "--n", 64, "--counts-only", code=2))
    simulating = error_line(flashsim("run", "--n", 64, code=2))
    assert counting.startswith("error: out of memory") and "--counts-only" not in counting
    assert simulating.startswith("error: out of memory") and simulating.endswith("or --counts-only")


def test_a_memory_refusal_counts_in_binary_units(monkeypatch):  # item 12: memory in KiB, MiB, GiB; traffic in GB
    monkeypatch.setattr(estimate, "available_memory", lambda: 2**30)
    line = error_line(flashsim("run", "--algo", "standard", "--n", 20000, "--d", 64, code=2))
    assert re.search(r"about [\d.]+ GiB of memory \(1\.0 GiB is free\)", line) and " GB" not in line


def test_the_traffic_table_counts_in_decimal_units():  # item 12: traffic in kB, MB, GB, as the paper writes it
    from sim.machine import iomodel

    n, d, s, block = 2048, 64, 2, 128  # fp16; the blocks A100-40GB's SRAM gives flash2 at d = 64 (checked below)
    kv = (n // block) * s * n * d  # K (and V) read once per Q block: 16 × 262,144 bytes
    reads, writes = s * n * d + 2 * kv, s * n * d + 4 * n  # Q once and K, V; O and the float32 L
    closed = iomodel.flash2(n, n, d, s, block, block)
    assert (closed.hbm_read_bytes, closed.hbm_write_bytes) == (reads, writes) == (8_650_752, 270_336)
    out = " ".join(flashsim("run", "--n", n, "--d", d, "--dtype", "fp16").stdout.split())
    table = out[out.index("HBM traffic") : out.index("HBM bytes")]
    assert "Br=128, Bc=128" in out and f"K │ {kv / 1e6:.1f} MB │ 0 B" in table  # 4.2 MB; binary: 4.0 MiB
    assert f"total │ {reads / 1e6:.1f} MB │ {writes / 1e3:.1f} kB" in table  # 8.7 MB, 270.3 kB; binary: 8.2 MiB
    assert "MiB" not in table and "KiB" not in table


@pytest.mark.parametrize("path", [("bench", "sim"), ("sweep",), ("walkthrough",)])
def test_the_long_commands_take_quiet(path):  # item 13: bench sim, sweep and walkthrough had no --quiet
    command = dict(commands())[path]
    assert "--quiet" in [opt for p in command.params for opt in p.opts]


def test_walkthrough_quiet_prints_the_listing_and_nothing_on_stderr():
    result = process("walkthrough", "--quiet")
    assert result.returncode == 0 and result.stderr == b"" and b"step 20" in result.stdout


@pytest.mark.parametrize(
    "args, total",
    [
        (("sim", "--n", 64, "--d", 16, "--repeats", 1, "--memory-n", 0), len(REGISTRY) + 2 * (1 + len(REGISTRY))),
        (("cli", "--n", 0, "--d", 16, "--counts-n", 64, "--repeats", 1), 2 * len(REGISTRY)),
    ],
)
def test_bench_sim_and_cli_advance_a_progress_bar_to_its_end(args, total, monkeypatch):  # item 11
    from sim.cli import bench
    from tests.test_grading_cli import Bars  # records each bar drawn

    monkeypatch.setattr(bench, "Work", Bars)
    monkeypatch.setattr(Bars, "made", [])
    flashsim("bench", *args, "--json")
    assert [(b["total"], b["done"]) for b in Bars.made] == [(total, total)]


@pytest.mark.parametrize("args", [("--dtype", "fp32", "--n", 256, "--scale", 5), ("--n", 256, "--scale", 30)])
def test_the_issues_false_verdicts_are_true(args):  # item 1, as reproduced (d = 64, the default)
    out = json.loads(flashsim("run", *args, "--json").stdout)
    assert out["tolerance"]["within"] is True and out["max_abs_err"] <= out["tolerance"]["bound"]
    assert "✓ within" in flashsim("run", *args).stdout
