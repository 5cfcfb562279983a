"""gpu.lab.check_report's judging, on hand-made measurements: which unit ncu found busiest, what counts as within."""

from dataclasses import replace

import pytest

from gpu import registry
from gpu.lab import check_report
from gpu.lab.model_grid import GRID, calls, launched
from gpu.lab.predict import rung_prediction
from sim.machine.timing import ATOMICS, DRAM, L2, MUFU, SMEM, TENSOR

MIB = 1 << 20


def test_busiest_unit_leaves_shared_memory_out_where_the_model_books_wgmma_reads_in_tensor():
    row = {check_report.PIPES[TENSOR]: 36.2, check_report.PIPES[SMEM]: 36.5, check_report.PIPES[MUFU]: 7.0}
    assert check_report.busiest(row, wgmma_in_tensor=False) == SMEM
    assert check_report.busiest(row, wgmma_in_tensor=True) == TENSOR
    assert check_report.busiest(row | {check_report.PIPES[L2]: 60.0}, wgmma_in_tensor=True) == L2
    assert check_report.busiest({}, wgmma_in_tensor=False) is None


def test_rung_7_is_judged_with_shared_memory_rung_6_without():
    # run 34's figures for rung 7 at d = 64, N = 16384, 1 × 16: shared-memory wavefronts 51.9%, L2 39.4%, tensor
    # 39.2%. Rung 7's model books wgmma's operand reads in SRAM (Launch.program): ncu's busiest is shared memory.
    # Rung 6's books them in the tensor rate: for it the same row would say L2. mma.sync rungs: always counted
    row = {check_report.PIPES[SMEM]: 51.9, check_report.PIPES[L2]: 39.4, check_report.PIPES[TENSOR]: 39.2}
    judged = {(r, d): check_report.wgmma_in_tensor(registry.rung(r), d) for r in (3, 5, 6, 7) for d in (64, 128)}
    assert judged == {(3, 64): False, (3, 128): False, (5, 64): False, (5, 128): False,
                      (6, 64): True, (6, 128): True, (7, 64): False, (7, 128): False}  # fmt: skip
    assert check_report.busiest(row, check_report.wgmma_in_tensor(registry.rung(7), 64)) == SMEM
    assert check_report.busiest(row, check_report.wgmma_in_tensor(registry.rung(6), 64)) == L2


def _entry(rung, pred_ms, meas_ms, bound, busiest, dram=(8 * MIB, 8 * MIB), l2=(100.0, 100.0)):
    predicted = {
        "ms": pred_ms,
        "device_ms": pred_ms,
        "bound": bound,
        "dram_read_bytes": dram[0],
        "l2_read_bytes": l2[0],
    }
    measured = {"ms": meas_ms, "kernel_ms": meas_ms, "busiest_pipe": busiest, "pipes": {},
                "dram_read_bytes": dram[1], "l2_read_bytes": l2[1]}  # fmt: skip
    return {"rung": rung, "predicted": predicted, "measured": measured}


def test_time_and_bound_are_judged_by_hand():
    g = {"d": 128, "n": 4096, "causal": False, "batch": 1, "heads": 16}
    rows = [
        (g, _entry(7, 1.25, 1.0, ATOMICS, L2)),  # ×1.25: within; the atomics run on L2, ncu's busiest: agrees
        (g, _entry(7, 0.74, 1.0, TENSOR, L2)),  # ×0.74: outside; tensor against L2: disagrees
    ]
    text, hits, missed = check_report.judge_time(rows, "datasheet")
    assert hits == {"time_within_25": [1, 2], "kernel_time_within_25": [1, 2], "bound_agrees": [1, 2]}
    assert text.startswith("time within 25% on 1/2 (CUDA events), 1/2 (ncu kernel time)")
    assert next(m for _, _, m in missed) == "time (CUDA events) 0.740 ms predicted, 1.000 measured (×0.74)"


def test_bytes_below_4_mib_of_dram_are_reported_not_judged():
    small = {"d": 64, "n": 1024, "causal": False, "batch": 1, "heads": 16}
    big = small | {"batch": 8}
    results = [
        {**small, "rungs": {"forward 2": _entry(2, 1, 1, TENSOR, None, dram=(3 * MIB, 1 * MIB), l2=(104.0, 100.0))}},
        {**big, "rungs": {"forward 2": _entry(2, 1, 1, TENSOR, None, dram=(23 * MIB, 20 * MIB), l2=(106.0, 100.0))}},
    ]
    results = [r | {"forward": r["rungs"]["forward 2"], "backward": r["rungs"]["forward 2"]} for r in results]
    summary = check_report.summarize(results)
    # DRAM ×1.15 within (the small shape's 1 MiB not judged); at L2 ×1.04 within, ×1.06 not
    assert summary["counts"]["forward 2"] == {"dram_within_20": [1, 1], "l2_within_5": [1, 2]}
    # the threshold is bytes moved, said in decimal units: 4·2²⁰ B = 4.2 MB
    assert f"forward 2: DRAM read within 20% on 1/1 shapes over {4 * MIB / 1e6:.1f} MB; " in summary["lines"][0]


def test_the_launch_plan_names_every_kernel_a_shape_runs():
    # rung 1 stops at N = 4096; each backward call is the pre-pass, the rung's kernel and the rounding of dQ
    assert calls(GRID[0])[:4] == [("forward", 1), ("forward", 2), ("forward", 3), ("forward", 6)]
    assert ("forward", 1) not in calls({**GRID[0], "n": 16384})
    assert launched("backward", 7) == ["flash2_bwd_prepass", "flash2_wgmma_bwd", "flash2_bwd_dq"]
    planned = sum(len(launched(*c)) for g in GRID for c in calls(g))
    assert planned == 16 * (4 + 6) + 8 * (3 + 6)  # the 232 launches run 33 profiled


def test_host_work_is_the_measured_recordings_own_else_the_calibrations():
    cal = {"host_seconds": {"forward 6": 65e-6, "backward 7": 143e-6, "forward 3": 48e-6}}
    measured = {"host_seconds": {"forward 6": 80e-6, "backward 7": 160e-6}}
    assert check_report.host_work(measured, cal) == {"forward 6": 80e-6, "backward 7": 160e-6, "forward 3": 48e-6}
    assert check_report.host_work({}, cal) == cal["host_seconds"]
    assert check_report.host_work(measured, None) == measured["host_seconds"]
    assert check_report.host_work({}, None) == {}


def _rows(g: dict) -> list[dict]:
    """ncu rows for every launch one shape makes (byte counts of 1, 1 µs each, no utilizations)."""
    keys = ("dram__bytes_read.sum", "dram__bytes_write.sum", "l1tex__m_xbar2l1tex_read_bytes.sum")
    return [{"kernel": name, "direction": direction, "rung": rung, "gpu__time_duration.sum": 1e3}
            | dict.fromkeys(keys, 1.0) for direction, rung in calls(g) for name in launched(direction, rung)]  # fmt: skip


def test_the_events_are_predicted_with_the_host_of_the_loop_that_timed_them():
    # run 41 call 5's miss: forward 6, d = 64, N = 1024, full, 1 × 16, events 36 µs a call; the probe of run
    # 42-pace15 found such calls' events equal to the host's seconds a call in the same loop. The model's GPU time
    # (~20 µs) is under that host's 36 µs, so the call is predicted at 36 µs: ×1.00 where the calibration's 23 µs
    # said ×0.64. Backward 7 has no loop figures here: its host is the calibration's 66.5 µs (GPU ~36 µs under it)
    g = {"d": 64, "n": 1024, "causal": False, "batch": 1, "heads": 16}
    timed = {"forward 6": 0.036, "backward 5": 1.0, "backward 7": 0.106}
    hw = check_report.hardware.get("H100-SXM")
    loop = {"forward 6": {"host_seconds": 36e-6, "clock_hz": hw.clock_hz}}
    out = check_report.compare_one(g, _rows(g), timed, hw, host={"forward 6": 23.1e-6, "backward 7": 66.5e-6},
                                   loop=loop)["rungs"]  # fmt: skip
    fwd, bwd = out["forward 6"]["predicted"], out["backward 7"]["predicted"]
    assert fwd["events_device_ms"] == fwd["device_ms"] < 0.036  # at the preset's own clock: the same prediction
    assert (fwd["host_ms"], fwd["ms"]) == pytest.approx((0.036, 0.036), rel=1e-12)
    assert bwd["device_ms"] < 0.0665
    assert (bwd["host_ms"], bwd["ms"], bwd["clock_ghz"]) == pytest.approx((0.0665, 0.0665, 1.83), rel=1e-12)


def test_the_events_are_predicted_at_the_clock_the_loop_ran():
    # half the preset's 1.83 GHz: every per-clock rate halves, so the tensor term of a tensor-bound call doubles
    # (d = 128, N = 16384, full, 8 × 16: forward 6 takes ~27 ms, its host's µs do not show); DRAM's does not move
    g = {"d": 128, "n": 16384, "causal": False, "batch": 8, "heads": 16}
    hw = check_report.hardware.get("H100-SXM")
    loop = {"forward 6": {"host_seconds": 30e-6, "clock_hz": hw.clock_hz / 2}}
    timed = {"forward 6": 27.0, "backward 5": 1.0, "backward 7": 1.0}
    fwd = check_report.compare_one(g, _rows(g), timed, hw, loop=loop)["rungs"]["forward 6"]["predicted"]
    shape = {"n": 16384, "nk": 16384, "d": 128, "batch": 8, "heads": 16, "s": 2, "causal": False}
    full = rung_prediction(registry.LADDER[6], hw, **shape).terms()
    half = rung_prediction(registry.LADDER[6], replace(hw, clock_hz=hw.clock_hz / 2), **shape)
    assert half.terms()[TENSOR] == pytest.approx(2 * full[TENSOR], rel=1e-12)
    assert half.terms()[DRAM] == pytest.approx(full[DRAM], rel=1e-12)
    assert fwd["clock_ghz"] == pytest.approx(0.915)
    assert fwd["ms"] == fwd["events_device_ms"] == pytest.approx(half.seconds * 1e3, rel=1e-12)
    assert fwd["ms"] > 1.5 * fwd["device_ms"]  # tensor-bound: nearly twice the time at the preset's clock
