"""Rung 7's step in instructions: its default builds' SASS, split where a consumer warpgroup waits or passes a turn.

`python -m gpu.lab.rung7_instructions` (on the CPU: nvcc's ptxas makes the cubin of 07_flash2_backward_wgmma.cu with
the #defines its launcher injects, nvdisasm prints it; nvdisasm from the CUDA toolkit or the wheel
nvidia-cuda-nvdisasm) prints, per head dim, the instructions one consumer warp issues in each piece of a step:

  S_ijᵀ, dP_ijᵀ   turn A's wait, then the descriptors and wgmma instructions of each commit group (to the one
                  carrying gsb0)
  exp             turn A's pass, wgmma_wait<1>, line 11 (L_i from SRAM, the FFMAs, ex2, the mask's branches)
  dS_ijᵀ          wgmma_wait<0>, line 14 (D_i from SRAM), the conversions to fp16 of P_ijᵀ and dS_ijᵀ, the last
                  reduce-add's read wait
  dV_j, dK_j      turn B's wait, dS_ij by stmatrix, the fences, the wgmma instructions of lines 12 and 16
  dQ_i            the dQ product's wgmma instructions
  τ dQ_i → SRAM   turn B's pass, the wait for the three, the stage handed back, τ dQ stored, the fences
  loop            the warpgroup's barrier, the reduce-add's issue (thread 0's warp), the loop's bookkeeping, the
                  next stage's wait
Each piece opens with the wait, turn or barrier before it (there ncu's samples of that wait land: on the instruction
the warp waits to issue, `gpu.lab.rung7_stalls`). Counted on the path of an inner tile (every item live, it > 0,
warp 0: the warp that issues the reduce-add and hands the stage back); `EDGE` counts the exp piece of an edge tile
(line 11's masked body); `BRANCHES` the branches a warp takes on an inner tile (one: the jump over the masked body;
before run 39 the one body took a branch per element of P_ijᵀ, 64 at d = 64). A warp issues at most one instruction a clock (its scheduler's rate: an H100 SM has
four schedulers, a warpgroup one warp on each), so a piece of n instructions takes a warpgroup at least n clocks
(`sim.machine.warpgroups`, `Op.instructions`).

The counts of the builds gpu/lab/predict.py models are kept in COUNTS (a CPU test recounts them where nvdisasm is
installed): they are the kernel's structure, not a measurement of time. They are nvcc's build; the library's is
NVRTC's (CuPy), whose loop ncu counted ~6% longer (run 38-model7: exp and dS_ijᵀ ~45 instructions more each at d = 64).
"""

import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

# `python -m gpu.lab.rung7_instructions` on 07_flash2_backward_wgmma.cu as of run 39 (line 11 as two bodies; nvcc
# 13.0, nvdisasm 13.5), fp16, DETERMINISTIC = 0: {(d, Br): {piece: instructions per warp}}, the exp piece of an edge
# tile apart, and the branches a warp takes in each piece on an inner tile
COUNTS = {
    (64, 128): {"S_ijᵀ": 82, "dP_ijᵀ": 45, "exp": 153, "dS_ijᵀ": 218, "dV_j, dK_j": 163, "dQ_i": 128,
                "τ dQ_i → SRAM": 79, "loop": 63},
    (128, 64): {"S_ijᵀ": 140, "dP_ijᵀ": 99, "exp": 81, "dS_ijᵀ": 113, "dV_j, dK_j": 93, "dQ_i": 119,
                "τ dQ_i → SRAM": 78, "loop": 64},
}  # fmt: skip
EDGE = {(64, 128): 862, (128, 64): 432}
BRANCHES = {
    key: dict.fromkeys(c, 0) | {"exp": 1} for key, c in COUNTS.items()
}  # taken: the jump over line 11's masked body

INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)([^;]*);")
LABEL = re.compile(r"^(\.L_x_\d+):")
TARGET = re.compile(r"`\((\.L_x_\d+)\)|\b(0x[0-9a-f]+)\s*$")  # nvdisasm's label, or ncu's absolute address


def parse(sass: str) -> tuple[list[tuple[str, bool, str]], dict[str, int]]:
    """nvdisasm's text (or ncu's source page, one "/*address*/ instruction ;" a line) → [(opcode, predicated,
    operands)] in address order, and {label or 0x-address: index of its instruction}."""
    code, labels = [], {}
    for line in sass.splitlines():
        if m := LABEL.match(line.strip()):
            labels[m.group(1)] = len(code)
        elif m := INSTRUCTION.search(line):
            labels[f"0x{int(m.group(1), 16):x}"] = len(code)
            code.append((m.group(3), bool(m.group(2)), m.group(4).strip()))
    return code, labels


def target(args: str, labels: dict[str, int]) -> int | None:
    """The index a branch's operands jump to (None: not a branch within the listing)."""
    m = TARGET.search(args)
    return None if m is None else labels.get(m.group(1) or f"0x{int(m.group(2), 16):x}")


def _find(code, start: int, test, what: str) -> int:
    """The index of the first instruction from `start` on that passes `test`."""
    for k in range(start, len(code)):
        if test(*code[k]):
            return k
    raise ValueError(f"rung7_instructions: no {what} after instruction {start}")


def turn(op: str, _p: bool, args: str) -> bool:
    return op.startswith("BAR.SYNC") and args.endswith("0x100")  # bar.sync 4 + c, 256: a turn


def passed(op: str, _p: bool, _a: str) -> bool:
    return op.startswith("BAR.ARV")


def group_end(op: str, _p: bool, args: str) -> bool:
    return op.startswith("HGMMA") and args.endswith("gsb0")  # the commit group's last wgmma


def waited(pending: str):
    return lambda op, _p, args: op == "WARPGROUP.DEPBAR.LE" and args.replace(" ", "") == f"gsb0,{pending}"


def walk(code, labels, begin: int, end: int, take_branches: bool) -> tuple[int, int]:
    """(instructions, taken branches) of a warp from `begin` to `end` (exclusive): an unconditional forward branch
    is followed, a conditional one falls through (the warp's path: the item live, thread 0's warp, an inner tile:
    ptxas lays line 11's unmasked body first) unless `take_branches` (then it is taken: an edge tile jumps to the
    masked body); a backward branch (a retry loop) is not taken."""
    k, n, taken = begin, 0, 0
    while k < end:
        op, predicated, args = code[k]
        n += 1
        if op.startswith("BRA") and (to := target(args, labels)) is not None:
            if to > k and (not predicated or take_branches):
                k, taken = max(to, k + 1), taken + 1
                continue
        k += 1
    return n, taken


def pieces(code, labels) -> dict[str, list[tuple[int, int]]]:
    """Each piece's ranges of instruction indices [begin, end) in the consumer's loop; a piece opens with the wait,
    turn or barrier before it (where ncu's samples of that wait land: on the instruction the warp waits to issue)."""
    first_mma = _find(code, 0, lambda op, _p, _a: op.startswith("HGMMA"), "wgmma")
    turn_a = max(k for k in range(first_mma) if turn(*code[k]))
    s_end = _find(code, turn_a, group_end, "S_ijᵀ commit")
    pass_a = _find(code, s_end, passed, "turn A's pass")
    exp0 = _find(code, pass_a, waited("0x1"), "wgmma_wait<1>")
    exp1 = _find(code, exp0, waited("0x0"), "wgmma_wait<0>")
    turn_b = _find(code, exp1, turn, "turn B")
    dvdk_end = _find(code, turn_b, group_end, "dV_j, dK_j commit")
    pass_b = _find(code, dvdk_end + 1, passed, "turn B's pass")
    wait_all = _find(code, pass_b, waited("0x0"), "the wait for the three")
    sync = _find(code, wait_all, lambda op, _p, args: op.startswith("BAR.SYNC") and args.endswith("0x80"),
                 "the warpgroup's barrier")  # fmt: skip
    back = _find(code, sync, lambda op, _p, args: op.startswith("BRA") and (to := target(args, labels)) is not None
                 and to <= turn_a, "the loop's back branch")  # fmt: skip
    head = target(code[back][2], labels)
    ranges = {
        "S_ijᵀ": [(turn_a, s_end + 1)],
        "dP_ijᵀ": [(s_end + 1, pass_a)],
        "exp": [(pass_a, exp1)],
        "dS_ijᵀ": [(exp1, turn_b)],
        "dV_j, dK_j": [(turn_b, dvdk_end + 1)],
        "dQ_i": [(dvdk_end + 1, pass_b)],
        "τ dQ_i → SRAM": [(pass_b, sync)],
        "loop": [(sync, back + 1), (head, turn_a)],
    }
    return ranges


def step_counts(sass: str) -> tuple[dict[str, int], int, dict[str, int]]:
    """{piece: instructions per warp} of the consumer's step on an inner tile (its opening wait, turn or barrier
    included: every instruction of the loop in one piece), the exp piece's on an edge tile, and {piece: branches a
    warp takes} on an inner tile."""
    code, labels = parse(sass)
    ranges = pieces(code, labels)
    walks = {name: [walk(code, labels, b, e, False) for b, e in spans] for name, spans in ranges.items()}
    edge = sum(walk(code, labels, b, e, True)[0] for b, e in ranges["exp"])
    return (
        {k: sum(n for n, _ in w) for k, w in walks.items()},
        edge,
        {k: sum(t for _, t in w) for k, w in walks.items()},
    )


def nvdisasm() -> str | None:
    """The nvdisasm on PATH, or the one the wheel nvidia-cuda-nvdisasm installs."""
    found = shutil.which("nvdisasm")
    if found:
        return found
    site = Path(sysconfig.get_paths()["purelib"]) / "nvidia"
    return next((str(p) for p in sorted(site.glob("*/bin/nvdisasm"))), None)


def sass_of(d: int) -> str:
    """The SASS of rung 7's default build at head dim d, fp16, as its launcher builds it (ptxas, sm_90a)."""
    from gpu import registry, source

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    tool = nvdisasm()
    if tool is None:
        raise FileNotFoundError("rung7_instructions: nvdisasm not found (CUDA toolkit, or pip nvidia-cuda-nvdisasm)")
    spec = registry.LADDER[7]
    with tempfile.TemporaryDirectory() as tmp:
        cu, cubin = Path(tmp) / spec.file, Path(tmp) / "out.cubin"
        cu.write_text(source.render(spec.file, spec.defines(d, "float16", None) | {"DETERMINISTIC": 0}))
        subprocess.run([nvcc, "-cubin", f"-arch={spec.arch}", "-o", str(cubin), str(cu)], check=True)
        return subprocess.run([tool, "-c", str(cubin)], check=True, capture_output=True, text=True).stdout


def counted() -> tuple[dict, dict, dict]:
    """COUNTS, EDGE and BRANCHES as the kernel's SASS gives them now, for each default build."""
    from gpu import registry

    counts, edge, branches = {}, {}, {}
    for d in registry.LADDER[7].head_dims:
        key = (d, registry.LADDER[7].tiles(d).block_rows)
        counts[key], edge[key], branches[key] = step_counts(sass_of(d))
    return counts, edge, branches


def main() -> None:
    counts, edge, branches = counted()
    for key, c in counts.items():
        print(f"d = {key[0]}, Br = {key[1]}: {c}, exp on an edge tile {edge[key]}, step {sum(c.values())}; taken "
              f"branches {branches[key]}")  # fmt: skip
    print("COUNTS =", counts, "\nEDGE =", edge, "\nBRANCHES =", branches, file=sys.stderr)


if __name__ == "__main__":
    main()
