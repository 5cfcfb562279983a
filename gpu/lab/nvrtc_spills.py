"""`python -m gpu.lab.nvrtc_spills [--json PATH]`: each kernel build a workload compiles, as NVRTC's ptxas reports it
(`-Xptxas -v`: registers, stack frame, spill stores and loads), one line a build.

The builds are those gpu.source compiles while the workload runs (`workload`: every rung this GPU runs, plain, at
d = 64 and 128, causal and not; rung 7 deterministic; the variant smoke cases on the forward rungs 3 and 6 and the
backward rungs 5 and 7; a decode step on a contiguous and a paged cache), so the table is of what runs. nvcc's front
end makes other PTX of the same source: run 47 found rung 7 at d = 64 spilling 8 bytes a thread under NVRTC and none
under `nvcc -Xptxas -v`, so spill counts read off nvcc describe a build that does not run."""

import argparse
import contextlib
import multiprocessing
import re
import shlex
import sys
import uuid
from concurrent.futures import ProcessPoolExecutor

from gpu import device, source
from gpu.lab import results

# ptxas's lines (NVRTC puts "ptxas         ." before the properties, nvcc only spaces)
PROPERTIES = re.compile(r"Function properties for (\w+)\s*(?:ptxas\s+\.)?\s*(\d+) bytes stack frame, (\d+) bytes "
                        r"spill stores, (\d+) bytes spill loads")  # fmt: skip
REGISTERS = re.compile(r"Compiling entry function '(\w+)'.*?Used (\d+) registers", re.S)


def parse(log: str) -> dict[str, dict[str, int]]:
    """{function: registers, stack, spill_stores, spill_loads} from ptxas's verbose report."""
    found = {name: {"stack": int(a), "spill_stores": int(b), "spill_loads": int(c)}
             for name, a, b, c in PROPERTIES.findall(log)}  # fmt: skip
    for name, registers in REGISTERS.findall(log):
        found.setdefault(name, {})["registers"] = int(registers)
    return found


def ptxas_report(text: str, arch: str) -> dict[str, dict[str, int]]:
    """{function: registers, stack, spill_stores, spill_loads} of `text` compiled by NVRTC for `arch` (sm_XY), or
    {"error": NVRTC's last line} where it does not compile."""
    from cupy.cuda import nvrtc

    # a symbol of its own, or NVRTC hands back a build it made before (in this or another process) with an empty
    # log: run 47 saw it on a warm machine, where a unique comment did not help (the key is the preprocessed source)
    program = nvrtc.createProgram(f"{text}\n__device__ int nvrtc_spills_{uuid.uuid4().hex};\n", "build.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(program, ("--std=c++17", f"-arch={arch}", "-Xptxas", "-v"))
        except nvrtc.NVRTCError:
            pass  # the log says why
        log = nvrtc.getProgramLog(program)
    finally:
        nvrtc.destroyProgram(program)
    log = log.decode() if isinstance(log, bytes) else log
    return parse(log) or {"error": (log.strip().splitlines() or ["no log"])[-1]}


@contextlib.contextmanager
def recording(builds: list):
    """Append (file, defines, arch) of each build gpu.source compiles inside the block to `builds`."""
    compile_module = source._module

    def recorded(file, define_items, arch):
        if (file, dict(define_items), arch) not in builds:  # a build is compiled again for another smem size
            builds.append((file, dict(define_items), arch))
        return compile_module(file, define_items, arch)

    source._module = recorded
    try:
        yield builds
    finally:
        source._module = compile_module


def workload() -> None:
    """The calls whose builds the table lists: small shapes, every rung this GPU runs."""
    from gpu import decoding, registry
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab.checks import random_like, random_qkv
    from gpu.lab.variant_checks import SMOKE, make_inputs

    cc = device.capability()
    runs = lambda spec, d: spec.fits(d, cc) is None  # noqa: E731
    for d in (64, 128):
        for causal in (False, True):
            q, k, v = random_qkv(1, 2, 200, 333, d, "float16", seed=d)
            for spec in registry.FORWARD.values():
                if runs(spec, d):
                    flash_attention(q, k, v, causal=causal, kernel=spec.rung)
            o, lse = flash_attention(q, k, v, causal=causal, return_lse=True)
            do = random_like(q, 1)
            for spec in registry.BACKWARD.values():
                if runs(spec, d):
                    flash_attention_backward(q, k, v, o, lse, do, causal=causal, kernel=spec.rung)
                    if spec.tma:
                        flash_attention_backward(q, k, v, o, lse, do, causal=causal, kernel=spec.rung,
                                                 deterministic=True)  # fmt: skip
            for variant in SMOKE.values():
                q, k, v, kw = make_inputs(1, 4, 200, 333, d, "bfloat16", variant, seed=d)
                for fwd, bwd in ((3, 5), (6, 7)):
                    if runs(registry.FORWARD[fwd], d) and runs(registry.BACKWARD[bwd], d):
                        o, lse = flash_attention(q, k, v, causal=causal, return_lse=True, kernel=fwd, **kw)
                        flash_attention_backward(q, k, v, o, lse, random_like(q, 2), causal=causal, kernel=bwd, **kw)
        cupy = device.require()
        q = cupy.asarray(random_qkv(2, 8, 1, 1, d, "float16", seed=1)[0])
        k, v = random_qkv(2, 2, 4096, 4096, d, "float16", seed=2)[1:]
        decoding.decode(q, k, v)
        table = cupy.arange(2 * 16, dtype=cupy.int32).reshape(2, 16)
        pages = [x.swapaxes(1, 2).reshape(32, 256, 2, d).copy() for x in (k, v)]  # (pages, page_size, Hkv, d)
        decoding.decode(q, *pages, block_table=table, cache_seqlens=cupy.asarray([4096, 3000], dtype=cupy.int32))
    cupy.cuda.Device().synchronize()


def _report(build: tuple, device_arch: str) -> dict[str, dict[str, int]]:
    file, defines, arch = build
    return ptxas_report(source.render(file, defines), arch or device_arch)  # CuPy's default: the device's own


def run(jobs: int = 8) -> dict:
    """The workload's builds, each compiled again by NVRTC with ptxas's report (in `jobs` processes)."""
    device.require()
    builds: list = []
    with recording(builds):
        workload()
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:  # no CUDA in a fork
        reports = list(pool.map(_report, builds, [f"sm_{device.capability().replace('.', '')}"] * len(builds)))
    rows = [{"file": file, "defines": defines, "arch": arch, "functions": report}
            for (file, defines, arch), report in zip(builds, reports, strict=True)]  # fmt: skip
    return {"kind": "nvrtc-spills", "rows": rows}


def describe(row: dict) -> list[str]:
    """One line a function of a build: '07_flash2_backward_wgmma.cu flash2_wgmma_bwd HEAD_DIM=64 …: 168 registers,
    stack 8, spills 8 / 8 bytes'."""
    defines = " ".join(f"{k}={v}" for k, v in row["defines"].items())
    if "error" in row["functions"]:
        return [f"{row['file']} {defines}: NVRTC: {row['functions']['error']}"]
    return [f"{row['file']} {name} {defines}: {f.get('registers', '?')} registers, stack {f.get('stack', 0)}, "
            f"spills {f.get('spill_stores', 0)} / {f.get('spill_loads', 0)} bytes"
            for name, f in row["functions"].items()]  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gpu.lab.nvrtc_spills")
    parser.add_argument("--json", help="write the report here (gpu/lab/results.py)")
    parser.add_argument("--jobs", type=int, default=8, help="processes compiling at once (1 to 64)")
    a = parser.parse_args(argv)
    if not 1 <= a.jobs <= 64:
        parser.error(f"--jobs: expected 1 to 64 processes, got {a.jobs}")  # one line, exit 2
    report = run(a.jobs)
    command = "python -m gpu.lab.nvrtc_spills " + shlex.join(sys.argv[1:] if argv is None else argv)
    report["env"] = results.environment(command)
    for row in report["rows"]:
        print("\n".join(describe(row)))
    if a.json:
        results.write(report, a.json)


if __name__ == "__main__":
    main()
