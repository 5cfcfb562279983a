"""`python -m gpu.lab.check_model report MEASURED.json [OUT.json [CALIBRATION.json]]`: predictions beside measurements.

Bytes are judged for every profiled rung; time and bound for the fastest rungs (the public call's defaults on the
H100, as `gpu.registry` picks them: forward rung 6; backward rung 7 at d = 64 and 128).
"""

import json
from dataclasses import replace
from pathlib import Path

from gpu import registry
from gpu.lab.model_grid import SLOW, calls, launched
from gpu.lab.predict import launch_of, rung_prediction
from sim.core.format import decimal_bytes
from sim.machine import hardware
from sim.machine.iomodel import sums
from sim.machine.timing import ATOMICS, DRAM, FMA, L2, LAUNCH, MUFU, REDUCES, SMEM, TENSOR, per_call

PIPES = {  # ncu's utilization (% of peak) of each unit the model names a bound
    TENSOR: "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    SMEM: "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_active",
    MUFU: "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    FMA: "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    L2: "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    DRAM: "dram__throughput.avg.pct_of_peak_sustained_elapsed",
}
UNIT = {ATOMICS: L2, REDUCES: L2}  # the unit a bound runs on: dQ's additions are L2's work
MIB = 1 << 20
SMALL = 4 * MIB  # below this much DRAM read the figures are reported, not judged (issue 22)
HOPPER = "9.0"


def busiest(row: dict, wgmma_in_tensor: bool) -> str | None:
    """The unit ncu found busiest in this profiled kernel (None: no utilizations recorded). Shared memory is left
    out where the model books wgmma's own operand reads, which ncu counts among its wavefronts, in the tensor
    rate (rung 6: 35–46% beside the tensor pipe's 52–71%, run 33); rung 7's model books them in SRAM
    (`Launch.program`), so there shared memory is judged like every other unit."""
    known = {name: row[metric] for name, metric in PIPES.items()
             if metric in row and not (wgmma_in_tensor and name == SMEM)}  # fmt: skip
    return max(known, key=known.__getitem__) if known else None


def wgmma_in_tensor(spec: registry.KernelSpec, d: int) -> bool:
    """Whether the model books rung `spec`'s wgmma operand reads in the tensor rate (rung 6), not in SRAM (rung 7's
    program; the mma.sync rungs' ldmatrix loads are SRAM's too)."""
    return spec.tma and launch_of(spec, d).program is None


def fastest(direction: str, d: int) -> int:
    """The rung the public call runs on the H100 at head dim d."""
    pick = registry.forward if direction == "forward" else registry.backward
    return pick(None, d, HOPPER).rung


def compare_one(g: dict, rows: list[dict], timed: dict, hw, tuned=None, host=None, loop=None) -> dict:
    """One shape: each profiled rung's bytes (and, for the timed calls, time) predicted beside measured. A timed
    call's events are predicted with the figures of the loop that timed them where the recording has them (`loop`:
    {name: {"host_seconds", "clock_hz"}}, check_model's): the host's seconds per call in that loop, and the kernels
    at the SM clock the GPU ran (the datasheet's per-clock rates × that clock; the calibrated rates are left as
    measured); else the host work of `host` and the preset's clock."""
    shape = {"n": g["n"], "nk": g["n"], "d": g["d"], "batch": g["batch"], "heads": g["heads"], "s": 2}
    out: dict = {}
    for direction, rung in profiled_calls(g, rows):
        name = f"{direction} {rung}"
        spec = registry.LADDER[rung]
        mine = [r for r in rows if (r["direction"], r["rung"]) == (direction, rung)]
        own = next(r for r in mine if r["kernel"] == spec.function)
        assert [r["kernel"] for r in mine] == launched(direction, rung)
        p = rung_prediction(spec, hw, causal=g["causal"], **shape)
        slowest = max(p.kernels, key=lambda k: k.time.seconds).time
        measured = {
            "dram_read_bytes": sum(r["dram__bytes_read.sum"] for r in mine),
            "dram_write_bytes": sum(r["dram__bytes_write.sum"] for r in mine),
            "l2_read_bytes": sum(r["l1tex__m_xbar2l1tex_read_bytes.sum"] for r in mine),
            "kernel_ms": sum(r["gpu__time_duration.sum"] for r in mine) / 1e6,
            "busiest_pipe": busiest(own, wgmma_in_tensor(spec, g["d"])),
            "pipes": {k: own.get(metric) for k, metric in PIPES.items()},
            "reduction_sectors": sum(r.get("lts__t_sectors_op_red.sum", 0.0) for r in mine),  # L2's, as ncu counts
        }
        predicted = {
            "dram_read_bytes": p.dram_read_bytes,
            "dram_write_bytes": p.dram_write_bytes,
            "l2_read_bytes": p.l2_to_sm_bytes,
            "reduced_bytes": sum(k.traffic.reduced for k in p.kernels),
            "device_ms": p.seconds * 1e3,
            "bound": p.bound,
            "in_series": p.in_series,
            "terms_ms": {k: v * 1e3 for k, v in p.terms().items()},
            "units_ms": {k: v * 1e3 for k, v in slowest.units.items()},  # the slowest kernel's, at their peaks
            "utilization": slowest.utilization,  # its units' shares of their peaks as ncu's `PIPES` count them
            "l2_parts_ms": {k: v * 1e3 for k, v in (slowest.l2_parts or {}).items()},  # its L2's parts
        }
        if name in timed:
            measured["ms"] = timed[name]
            seen = (loop or {}).get(name, {})
            h = seen.get("host_seconds", (host or {}).get(name, 0.0))  # the loop's host, else calibrate.host_seconds
            at = p if "clock_hz" not in seen else rung_prediction(spec, replace(hw, clock_hz=seen["clock_hz"]),
                                                                  causal=g["causal"], **shape)  # fmt: skip
            predicted["host_ms"] = h * 1e3
            predicted["clock_ghz"] = seen.get("clock_hz", hw.clock_hz) / 1e9
            predicted["events_device_ms"] = at.seconds * 1e3
            predicted["ms"] = per_call(at.seconds, h) * 1e3
            if tuned is not None:  # the same model with the rates calibrated on the GPU
                c = rung_prediction(spec, tuned, causal=g["causal"], **shape)
                predicted["calibrated"] = {"ms": per_call(c.seconds, h) * 1e3, "device_ms": c.seconds * 1e3,
                                           "bound": c.bound}  # fmt: skip
        out[name] = {"rung": rung, "predicted": predicted, "measured": measured}
    fast = {direction: out[f"{direction} {fastest(direction, g['d'])}"] for direction in ("forward", "backward")}
    return {"rungs": out, **fast}


def profiled_calls(g: dict, rows: list[dict]) -> list[tuple[str, int]]:
    """The calls a recording profiled on shape g: check_model's (`calls`), after the slow forward rungs past their
    length (`SLOW`) where check_slow added their rows (bytes only)."""
    have = {(r["direction"], r["rung"]) for r in rows}
    slow = [("forward", r) for r, most in SLOW.items() if g["n"] > most and ("forward", r) in have]
    return slow + calls(g)


def host_work(measured: dict, calibration: dict | None) -> dict[str, float]:
    """Each public call's host seconds: the measured recording's own (check_model measure times them on the machine
    that timed the grid: a lent machine's host moved 2× between days, NOTES run 41), else the calibration's."""
    return {**(calibration or {}).get("host_seconds", {}), **measured.get("host_seconds", {})}


def report(measured_path: str, out_path: str | None = None, calibration: str | None = None) -> dict:
    """Print one line per shape and profiled rung, and the summary against issue 22's targets; write JSON if asked.
    With a calibration recording, time is also predicted with the calibrated rates. Each call's host work
    (`host_work`) is set against its kernels' time."""
    data = json.loads(Path(measured_path).read_text())
    hw = hardware.get("H100-SXM")
    tuned = cal = None
    if calibration:
        cal = json.loads(Path(calibration).read_text())
        tuned = hardware.calibrated(hw, cal["rates"], cal.get("latencies"))
    host = host_work(data, cal)
    results = []
    print(f"{'rung':>10} {'d':>3} {'N':>5} {'c':>1} {'B×H':>6} | {'DRAM read MB pred/meas':>24} | {'L2→SM':>6} | "
          f"{'time ms pred/events ×ncu':>25} | {'bound / busiest pipe':>24}")  # fmt: skip
    for i, g in enumerate(data["grid"]):
        rows = [r for r in data["profiled"] if r["shape"] == i]
        one = compare_one(g, rows, data["timed"][str(i)], hw, tuned, host, data.get("loop", {}).get(str(i)))
        results.append({**g, **one})
        for name, r in one["rungs"].items():
            print(f"{name:>10} {g['d']:>3} {g['n']:>5} {'c' if g['causal'] else '-'} {g['batch']}×{g['heads']:<3} | "
                  + line(r["predicted"], r["measured"]))  # fmt: skip
    summary = summarize(results)
    for text in summary["lines"]:
        print(text)
    if out_path:
        record = {**data, "kind": "model-check", "calibration": calibration, "compared": results, "summary": summary}
        Path(out_path).write_text(json.dumps(record, indent=1))
    return summary


def line(p: dict, m: dict) -> str:
    """One rung's figures: DRAM read, L2 → SM, time (where timed) and bound."""
    read, measured = p["dram_read_bytes"], m["dram_read_bytes"]
    dram = f"{read / 1e6:>9.1f} /{measured / 1e6:>9.1f} ×{read / measured:.2f}"  # bytes moved: MB
    text = f"{dram} | ×{p['l2_read_bytes'] / m['l2_read_bytes']:.3f} | "
    if "ms" not in m:
        return text + f"{'':>7} /{'':>7} ×ncu {p['device_ms'] / m['kernel_ms']:.2f} |"
    cal = p.get("calibrated")
    text += f"{p['ms']:>7.3f} /{m['ms']:>7.3f} ×{p['ms'] / m['ms']:.2f} ×{p['device_ms'] / m['kernel_ms']:.2f} | "
    text += f"{p['bound']:>10} / {m['busiest_pipe'] or '—':<10}"
    paced = "host" if p["host_ms"] > p["events_device_ms"] else "GPU"  # which of the two the model says sets the pace
    text += f" {paced} {p['host_ms'] * 1e3:5.1f} µs {p['clock_ghz']:.2f} GHz"
    return text + (f" cal ×{cal['ms'] / m['ms']:.2f}" if cal else "")


def within(pred: float, meas: float, tol: float) -> bool:
    return abs(pred / meas - 1) <= tol


def summarize(results: list[dict]) -> dict:
    """How many shapes meet each of issue 22's targets: bytes for every rung profiled, time and bound for the
    fastest; each miss named with its figures."""
    lines, counts, misses = [], {}, []
    names = sorted({name for r in results for name in r["rungs"]}, key=lambda n: (n.split()[0] != "forward", n))
    for name in names:
        rs = [(r, r["rungs"][name]) for r in results if name in r["rungs"]]
        judged = [(g, x) for g, x in rs if x["measured"]["dram_read_bytes"] > SMALL]
        dram = [within(x["predicted"]["dram_read_bytes"], x["measured"]["dram_read_bytes"], 0.20) for _, x in judged]
        l2 = [within(x["predicted"]["l2_read_bytes"], x["measured"]["l2_read_bytes"], 0.05) for _, x in rs]
        misses += [f"{name} {where(g)}: DRAM read ×{x['predicted']['dram_read_bytes'] / x['measured']['dram_read_bytes']:.2f}"
                   for (g, x), ok in zip(judged, dram, strict=True) if not ok]  # fmt: skip
        misses += [f"{name} {where(g)}: L2 → SM ×{x['predicted']['l2_read_bytes'] / x['measured']['l2_read_bytes']:.3f}"
                   for (g, x), ok in zip(rs, l2, strict=True) if not ok]  # fmt: skip
        counts[name] = {"dram_within_20": [sum(dram), len(dram)], "l2_within_5": [sum(l2), len(l2)]}
        lines.append(f"{name}: DRAM read within 20% on {sum(dram)}/{len(dram)} shapes over {decimal_bytes(SMALL)}; "
                     f"L2 → SM within 5% on {sum(l2)}/{len(l2)}")  # fmt: skip
    for direction in ("forward", "backward"):
        rs = [(r, r[direction]) for r in results]
        c = counts[direction] = {}
        for rates in ("datasheet", "calibrated"):
            if rates == "calibrated" and "calibrated" not in rs[0][1]["predicted"]:
                continue
            text, hits, missed = judge_time(rs, rates)
            c[rates] = hits
            lines.append(f"{direction} (fastest rung), {rates} rates: {text}")
            misses += [f"{direction} rung {x['rung']} {where(g)}, {rates} rates: {m}" for g, x, m in missed]
    return {"lines": lines + ["misses:"] + [f"  {m}" for m in misses], "counts": counts, "misses": misses}


def judge_time(rs: list[tuple[dict, dict]], rates: str) -> tuple[str, dict, list]:
    """Time (CUDA events and ncu's kernel time) within 25% and bound = ncu's busiest unit, with `rates`."""
    hits: dict = {"time_within_25": [0, 0], "kernel_time_within_25": [0, 0], "bound_agrees": [0, 0]}
    missed = []
    for g, x in rs:
        p, m = x["predicted"], x["measured"]
        p = p["calibrated"] if rates == "calibrated" else p
        for key, pred, meas, what in (("time_within_25", p["ms"], m["ms"], "time (CUDA events)"),
                                      ("kernel_time_within_25", p["device_ms"], m["kernel_ms"], "ncu kernel time")):  # fmt: skip
            ok = within(pred, meas, 0.25)
            hits[key] = [hits[key][0] + ok, hits[key][1] + 1]
            if not ok:
                missed.append((g, x, f"{what} {pred:.3f} ms predicted, {meas:.3f} measured (×{pred / meas:.2f})"))
        unit = UNIT.get(p["bound"], p["bound"])
        if m["busiest_pipe"] and unit != LAUNCH:
            ok = unit == m["busiest_pipe"]
            hits["bound_agrees"] = [hits["bound_agrees"][0] + ok, hits["bound_agrees"][1] + 1]
            if not ok:
                missed.append((g, x, f"bound {p['bound']}, ncu's busiest {m['busiest_pipe']} ({pipes(m)})"))
    (t, n), (k, _), (b, m) = hits.values()
    text = f"time within 25% on {t}/{n} (CUDA events), {k}/{n} (ncu kernel time); bound = ncu's busiest unit on {b}/{m}"
    return text, hits, missed


def pipes(m: dict) -> str:
    """'tensor 36%, SRAM → registers 37%, …' from a measurement's utilizations."""
    return ", ".join(f"{k} {v:.0f}%" for k, v in m["pipes"].items() if v is not None)


def where(g: dict) -> str:
    """'d = 64, N = 1024, causal, 1 × 16'."""
    return f"d = {g['d']}, N = {g['n']}, {'causal' if g['causal'] else 'full'}, {g['batch']} × {g['heads']}"


# L2's two halves (gpu/NOTES.md run 40-model10, from the recordings): every address lives in one half; a request from
# an SM beside the other half is looked up there and again in its own (ncu's lts__t_sectors counts it twice: a
# reduce-add's sectors are 1.5 per 32 bytes, its lts__t_sectors_srcunit_tex_op_red 1.0) and crosses between them
FAR = 0.5  # of the addresses a request names live in the other half
FABRIC_PEAK = FAR * 3.01e12 / 0.87  # bytes a second across the halves at ncu's 100%: run 40-model9's reduce-add loop
# (3.01 TB/s at 87% of ltcfabric2ltc, half of its additions crossing)


def l2_counts(g: dict) -> dict[str, dict[str, float]]:
    """Rung 7's backward (plain, dQ rounded by the third launch) on shape g, each launch's bytes as its code moves
    them (07_flash2_backward_wgmma.cu, backward_passes.cu; fp16): reads, writes (the main kernel's dK_j, dV_j as
    sectors: a quad's 16 bytes of a row in a 32-byte sector of its own), dQ's reduce-adds, and the bytes that cross
    L2's halves (the main kernel's: half of its adds and stores, and each input byte once)."""
    bh, n, d, causal = g["batch"] * g["heads"], g["n"], g["d"], g["causal"]
    br = registry.LADDER[7].tiles_for(d, n, causal).block_rows
    padded = -(-n // br) * br
    acc = 4 * bh * n * d  # the float32 accumulator of dQ
    inputs = 2 * 4 * bh * n * d + 8 * bh * padded  # Q, K, V, dO and the L_i, D_i blocks, each byte once
    adds = 4 * d * bh * sums(n, n, br, 128, causal).r_seen  # dQ_i added once per tile pair (SPLIT_DQ)
    grads = 2 * 2 * bh * n * d  # dK_j, dV_j: 4-byte stores, a quad's 16 bytes a row: a sector per 16 bytes
    return {  # the pre-pass reads O, dO and L, writes the accumulator, D and the L_i, D_i blocks
        "pre-pass": {"read": 4 * bh * n * d + 4 * bh * n, "write": acc + 4 * bh * n + 8 * bh * padded},
        "main": {
            "inputs": inputs,
            "write_sectors": 2 * grads,
            "reduced": adds,
            "across": FAR * (adds + grads) + inputs,
        },
        "dQ rounded": {"read": acc, "write": acc // 2},
    }


def l2_table(data: dict) -> list[str]:
    """Rung 7's launches on each shape of a model-check recording: ncu's lts__t_bytes against (1 + FAR) × the bytes
    the SMs send (the passes), its reduction sectors against (1 + FAR) × the reduce-adds, what the main kernel's
    reads then leave at the tag stage against L2 → SM, and the bytes across the halves at FABRIC_PEAK against
    ncu's L2 utilization (the busiest of L2's parts)."""
    out = [f"{'d':>3} {'N':>5} c {'B×H':>6} | lts / counted: pre-pass, dQ | red / 1.5·adds | main reads at tags / L2→SM"
           " | across the halves % / ncu L2 %"]  # fmt: skip
    for i, g in enumerate(data["grid"]):
        mine = [r for r in data["profiled"] if r["shape"] == i and (r["direction"], r["rung"]) == ("backward", 7)]
        rows = {r["kernel"]: r for r in mine}
        pre, main, dq = (rows[name] for name in launched("backward", 7))
        c = l2_counts(g)
        sent = [(1 + FAR) * (c[k]["read"] + c[k]["write"]) for k in ("pre-pass", "dQ rounded")]
        m = c["main"]
        tags = main["lts__t_bytes.sum"] - (1 + FAR) * (m["reduced"] + m["write_sectors"])
        across = m["across"] / (main["gpu__time_duration.sum"] * 1e-9) / FABRIC_PEAK * 100
        out.append(f"{g['d']:>3} {g['n']:>5} {'c' if g['causal'] else '-'} {g['batch']}×{g['heads']:<3} | "
                   f"×{pre['lts__t_bytes.sum'] / sent[0]:.3f} ×{dq['lts__t_bytes.sum'] / sent[1]:.3f} | "
                   f"×{main['lts__t_sectors_op_red.sum'] * 32 / ((1 + FAR) * m['reduced']):.4f} | "
                   f"×{tags / main['l1tex__m_xbar2l1tex_read_bytes.sum']:.2f} | "
                   f"{across:5.1f} / {main['lts__throughput.avg.pct_of_peak_sustained_elapsed']:5.1f}")  # fmt: skip
    return out
