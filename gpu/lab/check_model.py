"""Does the machine model tell the truth? DRAM bytes, L2 → SM bytes, time and bound, predicted against the H100.

On the GPU: `python -m gpu.lab.check_model measure OUT.json` times (CUDA-event medians of the public calls, forward
rung 6 and backward rungs 5 and 7, in interleaved rounds after a second of warm-up) and profiles (one ncu run: DRAM
and L2 bytes, kernel time, the utilization of each pipe, shared memory, L2 and DRAM) every forward rung and backward
rungs 5 and 7 on issue 22's grid; rung 1 (a thousand times slower) only where N ≤ 4096; in the timing loop, each
timed call's host seconds a call and the SM clock after each sample (`loop`: what the report predicts the events
with, gpu/NOTES.md run 42-pace15); and, after the grid, each timed call's host work on this machine
(`calibrate.host_seconds`, for recordings without `loop`).
One call again after a kernel changed: `python -m gpu.lab.check_model measure OUT.json --only backward 7 --over
OLD.json` times and profiles that call alone (with the same warm-up and rounds) and writes OLD's record with that
call's measurements replaced.
Anywhere: `python -m gpu.lab.check_model report MEASURED.json [OUT.json [CALIBRATION.json]]` puts the model's
predictions beside those measurements and says how close each is (also with the rates `python -m
gpu.lab.calibrate` measured, given its recording; the host work is the measured recording's own where it has it); `python -m gpu.lab.check_model l2 MEASURED.json` sets
ncu's L2 counts of rung 7's backward beside the bytes its code moves (`check_report.l2_table`).
L2's parts: `python -m gpu.lab.check_model parts OUT_DIR` (on a GPU) profiles gpu.lab.l2_parts' loops and forward 6's and
backward 7's launches with ncu's breakdown of lts__throughput; `python -m gpu.lab.check_model parts-report
gpu/lab/results/l2-parts-h100.json [gpu/lab/results/l2-tags-pairs-h100.json]` fits each part's cost per byte of each
kind of work to the loops (`l2_parts.part_costs`; the prefetch's from rung 6's pairs, `gpu.lab.l2_tags`) and sets the
parts counted beside ncu's (`l2_parts.parts_table`).
"""

import csv
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gpu.lab.check_report import l2_table, report
from gpu.lab.l2_parts import part_costs, parts_table
from gpu.lab.model_grid import BACKWARD_RUNGS, FORWARD_RUNGS, GRID, TIMED, calls, launched

BYTES = {
    "dram_read_bytes": "dram__bytes_read.sum",
    "dram_write_bytes": "dram__bytes_write.sum",
    "l2_read_bytes": "l1tex__m_xbar2l1tex_read_bytes.sum",  # L2 → SM, as compare reports it
    "lts_bytes": "lts__t_bytes.sum",  # every byte through L2's tag stage
    "kernel_ns": "gpu__time_duration.sum",
}
WARM_S = 1.0  # seconds of work before the first timing
SM_PIPES = "(sm__pipe_.*cycles_active|sm__inst_executed_pipe_.*|l1tex__data_pipe_lsu_wavefronts_mem_shared)"
PIPES = (  # each SM pipe's and shared memory's utilization; L2's and DRAM's, and L2's reduction sectors
    f"regex:^({SM_PIPES}\\.avg\\.pct_of_peak_sustained_active"
    "|(lts|dram)__throughput\\.avg\\.pct_of_peak_sustained_elapsed|lts__t_sectors_op_red\\.sum)$"
)
CLOCKS = (  # the SM clock ncu saw, the SMs' active cycles, the MUFU's (XU's) instructions: a pipe's % is per cycle
    "sm__cycles_elapsed.avg.per_second,sm__cycles_active.avg,sm__inst_executed_pipe_xu.sum"
)
ATTEMPTS = (  # ncu's metrics, tried in turn until one set is accepted
    ",".join(BYTES.values()) + "," + CLOCKS + "," + PIPES,
    ",".join(BYTES.values()) + "," + PIPES,
    ",".join(BYTES.values()) + f",regex:^{SM_PIPES}\\.avg\\.pct_of_peak_sustained_active$",
    ",".join(BYTES.values()),
)


def run_all(profile: bool, only: tuple[str, int] | None = None, loop: dict | None = None) -> dict:
    """Every shape once (profile: every rung of `calls`, under ncu) or timed; returns {shape index: {"forward 6": ms,
    "backward 5": ms, …}} (empty when profiled). `only`: that (direction, rung) alone (the forward rung 6 that makes
    the backward's O and L still runs, outside ncu's kernel filter). `loop`, if given, gets {shape index: {"forward
    6": {"host_seconds": …, "clock_hz": …}, …}}: the medians over the timed samples of the host's seconds per call
    queuing them and of the SM clock just after each (`pace.sm_clock_hz`)."""
    from functools import partial

    from gpu import device
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab import pace, timing
    from gpu.lab.checks import random_like, random_qkv

    out = {}
    for i, g in enumerate(GRID):
        q, k, v = random_qkv(g["batch"], g["heads"], g["n"], g["n"], g["d"], "float16", seed=0)
        do = random_like(q, 1)
        o = lse = None
        if profile:
            if only and only[0] == "backward":
                o, lse = flash_attention(q, k, v, causal=g["causal"], kernel=6, return_lse=True)
            for direction, rung in [only] if only else calls(g):
                if direction == "forward":
                    o, lse = flash_attention(q, k, v, causal=g["causal"], kernel=rung, return_lse=True)
                else:
                    flash_attention_backward(q, k, v, o, lse, do, causal=g["causal"], kernel=rung)
            continue
        o, lse = flash_attention(q, k, v, causal=g["causal"], kernel=6, return_lse=True)
        fns = {
            f"forward {r}": partial(flash_attention, q, k, v, causal=g["causal"], kernel=r) for r in TIMED["forward"]
        }
        for r in TIMED["backward"]:
            fns[f"backward {r}"] = partial(flash_attention_backward, q, k, v, o, lse, do, causal=g["causal"], kernel=r)
        if only:
            fns = {f"{only[0]} {only[1]}": fns[f"{only[0]} {only[1]}"]}
        if i == 0:  # an idle GPU clocks down: a second of matmuls first (run 33 warmed up on shape 0's calls, which
            # leave the GPU idle between launches, and its first shapes still ran slow)
            cupy = device.require()
            a, warm = cupy.ones((8192, 8192), cupy.float16), time.perf_counter() + WARM_S
            while time.perf_counter() < warm:
                a @ a
                cupy.cuda.Device().synchronize()
        seen: dict = {name: ([], []) for name in fns}

        def after(name, _ms, host_seconds, seen=seen):
            seen[name][0].append(host_seconds)
            seen[name][1].append(pace.sm_clock_hz())

        out[i] = timing.interleaved_ms(fns, after=after)  # rounds of one sample each: slow clocks touch all alike
        if loop is not None:
            loop[i] = {name: {"host_seconds": statistics.median(h), "clock_hz": statistics.median(c)}
                       for name, (h, c) in seen.items()}  # fmt: skip
    return out


def profiled_rows(lines: list[str]) -> list[dict]:
    """ncu's CSV (one row per kernel and metric) as one dict per kernel launch, in launch order."""
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    rows: dict[int, dict] = {}
    for row in csv.DictReader(lines[start:] if start is not None else []):
        entry = rows.setdefault(int(row["ID"]), {"kernel": row["Kernel Name"].split("(")[0]})
        entry[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    return [rows[i] for i in sorted(rows)]


def label(rows: list[dict], only: tuple[str, int] | None = None) -> list[dict]:
    """Each profiled launch tagged with its shape index, direction and rung (checked against the launch plan)."""
    plan = [(i, direction, rung, name) for i, g in enumerate(GRID) for direction, rung in ([only] if only else calls(g))
            for name in launched(direction, rung)]  # fmt: skip
    if [name for *_, name in plan] != [r["kernel"] for r in rows]:
        sys.exit(f"check_model: ncu profiled {len(rows)} launches, not the {len(plan)} planned, or in another order")
    return [
        {**r, "shape": i, "direction": direction, "rung": rung}
        for (i, direction, rung, _), r in zip(plan, rows, strict=True)
    ]


def measure(path: str, only: tuple[str, int] | None = None, over: str | None = None) -> None:
    """Time every shape, then profile them all in one ncu run; write the measurements to `path`. With `only`, that
    call alone, its measurements put in place of `over`'s (a record of the whole grid)."""
    from gpu import registry
    from gpu.lab import calibrate, counters, results

    command = f"python -m gpu.lab.check_model measure {path}" + (
        f" --only {only[0]} {only[1]} --over {over}" if only else ""
    )
    loop: dict = {}
    record = {"kind": "model-check", "env": results.environment(command), "grid": GRID}
    record["timed"] = run_all(False, only, loop)
    record["loop"] = loop
    record["host_seconds"] = calibrate.host_seconds()  # this machine's host, as warm as the grid's timings left it
    Path(path).write_text(json.dumps(record, indent=1))  # the timings kept should ncu fail or run out of time
    if only:
        names = {(registry.FORWARD if only[0] == "forward" else registry.BACKWARD)[only[1]].function}
    else:
        names = {registry.FORWARD[r].function for r in FORWARD_RUNGS} | {
            registry.BACKWARD[r].function for r in BACKWARD_RUNGS
        }
    if not only or only[0] == "backward":
        names |= {registry.HELPERS[h].function for h in ("bwd_prepass", "bwd_dq")}
    base = [counters.ncu_path(), "--clock-control", "none", "--csv", "--print-units", "base"]
    base += ["--kernel-name", "regex:^(" + "|".join(sorted(names)) + ")$"]
    lines: list[str] = []
    for metrics in ATTEMPTS:
        run = subprocess.run(
            [*base, "--metrics", metrics, sys.executable, "-m", "gpu.lab.check_model", "profiled",
             *(map(str, only) if only else ())],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        lines = run.stdout.splitlines()
        if run.returncode == 0 and any(line.startswith('"ID"') for line in lines):
            break
        print("ncu failed:", (run.stderr or run.stdout)[-2000:], file=sys.stderr)
    record["profiled"] = label(profiled_rows(lines), only)
    if only:
        record = replaced(json.loads(Path(over).read_text()), record, only)
    Path(path).write_text(json.dumps(record, indent=1))


PARTS = (  # L2's parts (`breakdown:` lists what lts__throughput is the maximum of) and the bytes each kind of work moves
    "breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,"
    "gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,"
    "lts__t_sectors_op_red.sum,lts__t_bytes.sum,l1tex__m_xbar2l1tex_read_bytes.sum,dram__bytes_read.sum,"
    "dram__bytes_write.sum"
)


def parts(out_dir: str, only: str | None = None) -> None:
    """L2's parts under ncu (`PARTS`, L2 flushed before each launch): the L2 loops (`l2_parts.LOOPS`), then
    forward rung 6 and backward rung 7's three launches on every shape of the grid. Writes ncu's CSVs and the
    parsed record (`l2-parts.json`: each launch's counters, the loops' bytes by kind) into `out_dir`."""
    from gpu import device, registry
    from gpu.lab import counters, l2_parts, results

    out = Path(out_dir)
    base = [counters.ncu_path(), "--clock-control", "none", "--cache-control", "all", "--csv", "--print-units", "base",
            "--metrics", PARTS]  # fmt: skip
    record = {
        "kind": "l2-parts",
        "env": results.environment(f"python -m gpu.lab.check_model parts {out_dir}"),
        "grid": GRID,
    }
    loops = [dict(zip(("name", "kernel"), loop[:2], strict=True)) for loop in l2_parts.LOOPS
             if loop[1] != "reduces" or device.capability() == "9.0"]  # fmt: skip
    names = {
        "loops": "|".join(sorted(l2_parts.KIND_OF)),
        "grid": "|".join([registry.FORWARD[6].function, *launched("backward", 7)]),
    }
    programs = {"loops": ["gpu.lab.l2_parts"], "grid": ["gpu.lab.check_model", "profiled", "backward", "7"]}
    for what in (only,) if only else ("loops", "grid"):
        with open(out / f"{what}.csv", "w") as csv_out, open(out / f"{what}.stderr", "w") as err:
            subprocess.run([*base, "--kernel-name", f"regex:^({names[what]})$", sys.executable, "-m", *programs[what]],
                           stdout=csv_out, stderr=err, check=False)  # fmt: skip
        lines = (out / f"{what}.csv").read_text().splitlines()
        rows = profiled_rows([x for x in lines if x.startswith('"')])  # ncu's CSV, not the program's own line
        if what == "loops":  # the bytes each loop moved, as the program printed them
            printed = next((json.loads(x) for x in lines if x.startswith("[{")), loops)
            record["loops"] = [{**loop, **r} for loop, r in zip(printed, rows, strict=False)]
        else:
            plan = [(i, direction) for i in range(len(GRID)) for direction in ["forward"] + ["backward"] * 3]
            record["profiled"] = [{**r, "shape": i, "direction": direction, "rung": 6 if direction == "forward" else 7}
                                  for (i, direction), r in zip(plan, rows, strict=False)]  # fmt: skip
        (out / "l2-parts.json").write_text(json.dumps(record, indent=1))


def replaced(old: dict, new: dict, only: tuple[str, int]) -> dict:
    """`old`'s record (the whole grid) with the timings, profiled launches, host work and loop figures (host and
    clock in the timing loop) of call `only` taken from `new`; the environment says which record each comes from."""
    name = f"{only[0]} {only[1]}"
    if old["grid"] != new["grid"]:
        sys.exit("check_model: the record to replace into was measured on another grid")
    timed = {i: {**t, name: new["timed"][int(i)][name]} for i, t in old["timed"].items()}
    rows = [r for r in old["profiled"] if (r["direction"], r["rung"]) != tuple(only)] + new["profiled"]
    host = dict(old.get("host_seconds", {}))
    if name in new.get("host_seconds", {}):
        host[name] = new["host_seconds"][name]
    mine = {int(i): x[name] for i, x in new.get("loop", {}).items() if name in x}  # this run's, by shape
    loop = {}
    for i in range(len(old["grid"])):
        kept = {k: v for k, v in old.get("loop", {}).get(str(i), {}).items() if k != name}
        if kept or i in mine:
            loop[str(i)] = kept | ({name: mine[i]} if i in mine else {})
    return {"kind": "model-check", "env": {**new["env"], "replaces": name, "over": old["env"]}, "grid": old["grid"],
            "timed": timed, "profiled": rows} | ({"host_seconds": host} if host else {}) | ({"loop": loop} if loop else {})  # fmt: skip


USAGE = (
    "usage: python -m gpu.lab.check_model measure OUT.json [--only DIRECTION RUNG --over OLD.json] (on a GPU, ncu)\n"
    "       python -m gpu.lab.check_model report MEASURED.json [OUT.json [CALIBRATION.json]] (anywhere)\n"
    "       python -m gpu.lab.check_model l2 MEASURED.json (anywhere)\n"
    "       python -m gpu.lab.check_model parts OUT_DIR [loops | grid] (on a GPU, ncu)\n"
    "       python -m gpu.lab.check_model parts-report PARTS.json [PAIRS.json] (anywhere)"
)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["profiled"]:
        run_all(True, (argv[1], int(argv[2])) if len(argv) == 3 else None)
    elif argv[:1] == ["measure"] and (
        len(argv) == 2 or (len(argv) == 7 and argv[2] == "--only" and argv[5] == "--over")
    ):
        from gpu import device

        try:
            measure(argv[1], (argv[3], int(argv[4])) if len(argv) == 7 else None, argv[6] if len(argv) == 7 else None)
        except device.GPUUnavailableError as e:
            sys.exit(f"check_model: {e}")
    elif 2 <= len(argv) <= 3 and argv[0] == "parts" and argv[2:] in ([], ["loops"], ["grid"]):
        parts(*argv[1:])
    elif len(argv) in (2, 3) and argv[0] == "parts-report":
        data = json.loads(Path(argv[1]).read_text())
        costs = part_costs(data["loops"], json.loads(Path(argv[2]).read_text())["profiled"] if argv[2:] else None)
        print("each part's seconds at its 100% per byte (ps), by kind:")
        for part, cs in costs.items():
            print(f"  {part}: " + ", ".join(f"{k} {c * 1e12:.4f}" for k, c in cs.items()))
        print("\n".join(parts_table(data, costs)))
    elif 2 <= len(argv) <= 4 and argv[0] == "report":
        report(*argv[1:])
    elif len(argv) == 2 and argv[0] == "l2":
        print("\n".join(l2_table(json.loads(Path(argv[1]).read_text()))))
    else:
        print(USAGE)
        sys.exit(0 if argv[:1] in (["--help"], ["-h"]) else 2)


if __name__ == "__main__":
    main()
