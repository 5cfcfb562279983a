"""What L2's tag stage does for forward rung 6 (issue 22's last bound line, gpu/NOTES.md run 44-model16): ncu's
lts__t_sectors / lts__t_requests split by source unit (the SMs' TEX, the other L2 half over the fabric), operation
and lookup, and L2's parts, on a few shapes, for the public call and for two builds of the same kernel that each
leave one thing out: Q_i's prefetch into L2 (`tma_prefetch_3d`, the producer's, a tile ahead) and, causal, the
host's walk (WALK 0: the static walk of pairs).

On a GPU: `python -m gpu.lab.l2_tags run OUT_DIR` (ncu; writes OUT_DIR/l2-tags.json, the CSV and the metric list),
`python -m gpu.lab.l2_tags pairs OUT_DIR` (L2's parts, the call and the build without the prefetch REPEATS times each,
alternating: OUT_DIR/l2-tags-pairs.json) and `python -m gpu.lab.l2_tags timed OUT_DIR` (CUDA events, each build
beside the call). Anywhere: `python -m gpu.lab.l2_tags table RECORD` prints each launch's tag sectors in MB by source
and operation, and its busiest parts.
"""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

SHAPES = (  # (d, N, causal, batch, heads): the bound's miss, its full twin, and two more causal shapes L2 misses at
    (64, 1024, True, 8, 16),
    (64, 1024, False, 8, 16),
    (128, 1024, True, 8, 16),
    (128, 4096, True, 1, 16),
)
BUILDS = ("call", "no_prefetch", "static_walk")  # the public call; rung 6 without Q_i's prefetch; causal without WALK
PREFETCH = re.compile(r"tma_prefetch_3d\(&Q_map, [^;]*\);")
FIXED = (  # asked by name should the query's list fail
    "lts__t_bytes.sum,lts__t_sectors.sum,lts__t_requests.sum,lts__t_sectors_srcunit_tex.sum,"
    "lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,"
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum,"
    "lts__t_requests_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_ltcfabric.sum,"
    "lts__t_requests_srcunit_ltcfabric.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum"
)
ALWAYS = (  # L2's parts (check_model.PARTS' breakdown), what L2 handed the SMs (TMA's share too), DRAM, time
    "breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,"
    "l1tex__m_xbar2l1tex_read_bytes.sum,l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum,"
    "dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum"
)


REPEATS = 5  # `pairs`: launches of the call and of the build without the prefetch, alternating, on each shape


def plan(pairs: bool = False) -> list[dict]:
    """Each launch the program makes, in order: shape and build (`pairs`: the call and no_prefetch, REPEATS times)."""
    if pairs:
        return [{"d": d, "n": n, "causal": c, "batch": b, "heads": h, "build": build}
                for d, n, c, b, h in SHAPES for _ in range(REPEATS) for build in BUILDS[:2]]  # fmt: skip
    return [{"d": d, "n": n, "causal": c, "batch": b, "heads": h, "build": build}
            for d, n, c, b, h in SHAPES for build in BUILDS if build != "static_walk" or c]  # fmt: skip


def _without_prefetch(render):
    """`source.render`, but a build with NO_Q_PREFETCH has the producer's one prefetch of Q_i left out."""

    def rendered(file, defines):
        text = render(file, defines)
        if not defines.get("NO_Q_PREFETCH"):
            return text
        out, n = PREFETCH.subn(";", text)
        if n != 1:
            raise RuntimeError(f"l2_tags: found {n} prefetches of Q_i in {file}, not the one the producer issues")
        return out

    return rendered


def launcher(g: dict):
    """A function that runs shape g's build once on fixed random inputs (seed 0) and returns its O."""
    from gpu import device, flash, inputs, layout, registry, source
    from gpu.lab.checks import random_qkv

    cupy = device.require()
    q, k, v = random_qkv(g["batch"], g["heads"], g["n"], g["n"], g["d"], "float16", seed=0)
    if g["build"] == "call":
        return lambda: flash.flash_attention(q, k, v, causal=g["causal"], kernel=6)
    if source.render.__name__ != "rendered":  # once a process: builds with NO_Q_PREFETCH leave Q_i's prefetch out
        source.render = _without_prefetch(source.render)
    spec = registry.FORWARD[6]
    extra = {"NO_Q_PREFETCH": 1} if g["build"] == "no_prefetch" else {"WALK": 0}
    built = dataclasses.replace(spec, defines_of=lambda d, dtype, tiles: spec.defines_of(d, dtype, tiles) | extra)
    p = inputs.check(q, k, v, causal=g["causal"], scale=None, dtypes_allowed=spec.dtypes, gqa=True)
    stream = cupy.cuda.get_current_stream().ptr
    the_plan = flash.make_plan(built, p, None, flash.variant_key(flash.PLAIN), q.device.id, stream)
    rows = [layout.rows_of(x, the_plan.row) for x in (q, k, v)]

    def run():
        o = cupy.empty((*q.shape[:-1], the_plan.row), dtype=q.dtype)
        lse = cupy.empty(q.shape[:-1], dtype=cupy.float32)
        flash.launch_plan(the_plan, p, *rows, o, lse, flash.PLAIN)
        return layout.trimmed(o, p.d)

    return run


def profiled(pairs: bool = False) -> None:
    """The program ncu profiles: each launch of `plan` once; prints the plan and each build's largest difference
    from the call's output (the builds change where bytes go, not what is computed)."""
    from gpu import device

    cupy = device.require()
    done, ref, made = [], {}, {}
    for g in plan(pairs):
        key = tuple(g.values())
        made[key] = made.get(key) or launcher(g)
        o = made[key]()
        cupy.cuda.Device().synchronize()
        key = (g["d"], g["n"], g["causal"], g["batch"], g["heads"])
        if g["build"] == "call" and key not in ref:
            ref[key] = o
        diff = float(cupy.abs(o.astype(cupy.float32) - ref[key].astype(cupy.float32)).max())
        done.append({**g, "max_diff_from_call": diff})
    print(json.dumps(done))


def chosen(listing: str) -> str:
    """Every lts__t_sectors* / lts__t_requests* counter the query lists (device aperture), summed over L2's slices."""
    names = sorted({m[0] for m in (line.split() for line in listing.splitlines()) if m
                    and re.match(r"^lts__t_(sectors|requests)(_\w+)?$", m[0]) and "aperture" not in m[0]
                    and "realtime" not in m[0]})  # fmt: skip
    return ",".join(f"{n}.sum" for n in names)


def run(out_dir: str, pairs: bool = False) -> None:
    """ncu over `profiled` (L2 flushed before each launch): every tag counter the query lists and L2's parts, or
    (`pairs`) L2's parts and the tag stage's totals, the call and no_prefetch REPEATS times each."""
    from gpu.lab import counters, results
    from gpu.lab.check_model import profiled_rows

    out, ncu = Path(out_dir), counters.ncu_path()
    listing = "" if pairs else subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True).stdout
    if listing:
        (out / "lts-metrics.txt").write_text("\n".join(x for x in listing.splitlines() if x.startswith("lts__")))
    base = [ncu, "--clock-control", "none", "--cache-control", "all", "--csv", "--print-units", "base",
            "--kernel-name", "regex:^flash2_v4_fwd$"]  # fmt: skip
    verb = "pairs" if pairs else "run"
    record = {"kind": "l2-tags", "env": results.environment(f"python -m gpu.lab.l2_tags {verb} {out_dir}")}
    for attempt, tags in enumerate((FIXED,) if pairs else (chosen(listing), FIXED)):
        done = subprocess.run([*base, "--metrics", ALWAYS + "," + tags, sys.executable, "-m", "gpu.lab.l2_tags",
                               "profiled", *(["pairs"] if pairs else [])], capture_output=True, text=True,
                              check=False)  # fmt: skip
        (out / f"ncu-{attempt}.csv").write_text(done.stdout)
        (out / f"ncu-{attempt}.stderr").write_text(done.stderr[-20000:])
        lines = done.stdout.splitlines()
        rows = profiled_rows([x for x in lines if x.startswith('"')])
        printed = next((json.loads(x) for x in lines if x.startswith("[{")), None)
        if rows and printed and len(rows) == len(printed):
            record["profiled"] = [{**g, **r} for g, r in zip(printed, rows, strict=True)]
            record["metrics"] = "fixed" if tags is FIXED else "query"
            break
        print(f"l2_tags: attempt {attempt}: {len(rows)} rows, exit {done.returncode}", file=sys.stderr)
    (out / f"l2-tags{'-pairs' if pairs else ''}.json").write_text(json.dumps(record, indent=1))


def timed(out_dir: str) -> None:
    """Each build beside the call, interleaved CUDA-event medians (ms), per shape."""
    from gpu.lab import timing

    found = []
    for d, n, c, b, h in SHAPES:
        fns = {g["build"]: launcher(g) for g in plan() if (g["d"], g["n"], g["causal"], g["batch"]) == (d, n, c, b)}
        ms = timing.interleaved_ms(fns, rounds=9, budget_s=1.0)
        found.append({"d": d, "n": n, "causal": c, "batch": b, "heads": h, "ms": ms})
        print(found[-1])
    Path(out_dir, "l2-tags-timed.json").write_text(json.dumps(found, indent=1))


def table(record: dict) -> list[str]:
    """Each launch: kernel µs, L2 → SM MB, tag sectors (MB, 32 bytes each) in all, from the SMs (TEX: reads, writes,
    the rest: the prefetch's, which ncu names no operation) and from the other half (over the fabric: reads, writes,
    the rest), and L2's busiest parts (% of peak)."""
    mb = {k: 32e-6 if "sectors" in k else 1e-6 for r in record["profiled"] for k in r}
    out = ["d N c B×H build | µs | L2→SM | tags | TEX read write rest | fabric read write rest | fabric% tags%"]
    for r in record["profiled"]:

        def v(name, r=r):
            return r.get(name + ".sum", float("nan")) * mb.get(name + ".sum", 1e-6)  # nan: not asked

        tex = [v(f"lts__t_sectors_srcunit_tex{op}") for op in ("", "_op_read", "_op_write")]
        fab = [v(f"lts__t_sectors_srcunit_ltcfabric{op}") for op in ("", "_op_read", "_op_write")]
        pct = [r.get(f"lts__{p}.avg.pct_of_peak_sustained_elapsed", 0) for p in ("ltcfabric2ltc_cycles_active",
                                                                                  "t_sectors")]  # fmt: skip
        out.append(f"{r['d']} {r['n']} {'c' if r['causal'] else '-'} {r['batch']}×{r['heads']} {r['build']:<11} | "
                   f"{r['gpu__time_duration.sum'] / 1e3:5.1f} | {v('l1tex__m_xbar2l1tex_read_bytes'):5.1f} | "
                   f"{v('lts__t_sectors'):5.1f} | {tex[0]:5.1f} {tex[1]:5.1f} {tex[2]:4.1f} {tex[0] - tex[1] - tex[2]:4.1f}"
                   f" | {fab[0]:5.1f} {fab[1]:5.1f} {fab[2]:4.1f} {fab[0] - fab[1] - fab[2]:4.1f} | "
                   f"{pct[0]:4.1f} {pct[1]:4.1f}")  # fmt: skip
    return out


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["profiled"] and argv[1:] in ([], ["pairs"]):
        profiled(argv[1:] == ["pairs"])
    elif len(argv) == 2 and argv[0] in ("run", "pairs"):
        run(argv[1], argv[0] == "pairs")
    elif len(argv) == 2 and argv[0] == "timed":
        timed(argv[1])
    elif len(argv) == 2 and argv[0] == "table":
        print("\n".join(table(json.loads(Path(argv[1]).read_text()))))
    else:
        sys.exit("usage: python -m gpu.lab.l2_tags run OUT_DIR | pairs OUT_DIR | timed OUT_DIR (on a GPU) | table FILE")


if __name__ == "__main__":
    main()
