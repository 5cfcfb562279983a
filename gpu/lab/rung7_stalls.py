"""Where rung 7's warps spend a step: ncu's warp-state samples per SASS instruction, summed over the pieces of
`gpu.lab.rung7_instructions` (its split of the step at waits, turns and barriers).

On the GPU: `ncu --clock-control none --section SourceCounters --kernel-name flash2_wgmma_bwd --launch-skip 1
--launch-count 1 -o REP python -m gpu.lab.rung7_stalls run D` (one backward of 16k tokens at N = 4096, fp16, the
default build at head dim D, twice: the second is profiled), then `ncu --import REP.ncu-rep --page source
--print-source sass --csv > CSV`. Anywhere: `python -m gpu.lab.rung7_stalls pieces CSV` prints each piece's share
of the samples.
"""

import csv
import sys
from pathlib import Path

from gpu.lab.rung7_instructions import parse, pieces

SAMPLES, EXECUTED = "Warp Stall Sampling (All Samples)", "Instructions Executed"


def run(d: int) -> None:
    """Two backward calls of rung 7 at head dim d, N = 4096, 4 × 2048 / d heads (16k tokens, hidden 2048), fp16."""
    from gpu.backward import flash_attention_backward
    from gpu.flash import flash_attention
    from gpu.lab.checks import random_like, random_qkv

    q, k, v = random_qkv(4, 2048 // d, 4096, 4096, d, "float16", seed=0)
    do = random_like(q, 1)
    o, lse = flash_attention(q, k, v, kernel=6, return_lse=True)
    for _ in range(2):
        flash_attention_backward(q, k, v, o, lse, do, kernel=7)


def by_piece(path: str) -> dict[str, dict]:
    """ncu's source page (CSV) → {piece: {"samples": n, "executed": warp instructions, "reasons": {stall: n}}} for
    the consumer loop's pieces, and "other" (the producer, before and after the loop, the waits' retry loops)."""
    rows = list(csv.reader(Path(path).open()))
    head = next(i for i, r in enumerate(rows) if r[:2] == ["Address", "Source"])
    names, body = rows[head], [r for r in rows[head + 1 :] if len(r) > 2 and r[0].startswith("0x")]
    col = {n: i for i, n in enumerate(names)}
    reasons = [n for n in names if n.startswith("stall_") and "(Not Issued)" not in n]
    code, labels = parse("\n".join(f"/*{r[0][2:]}*/ {r[1]} ;" for r in body))
    where = {k: name for name, spans in pieces(code, labels).items() for b, e in spans for k in range(b, e)}
    out: dict[str, dict] = {}
    for k, r in enumerate(body):
        piece = out.setdefault(where.get(k, "other"), {"samples": 0, "executed": 0, "reasons": {}})
        piece["samples"] += int(float(r[col[SAMPLES]] or 0))
        piece["executed"] += int(float(r[col[EXECUTED]] or 0))
        for n in reasons:
            piece["reasons"][n] = piece["reasons"].get(n, 0) + int(float(r[col[n]] or 0))
    return out


def main(argv: list[str]) -> None:
    if argv[:1] == ["run"]:
        run(int(argv[1]))
    elif argv[:1] == ["pieces"]:
        out = by_piece(argv[1])
        loop = sum(v["samples"] for k, v in out.items() if k != "other")
        for name, v in out.items():
            top = sorted(v["reasons"].items(), key=lambda x: -x[1])[:3]
            share = f"{v['samples'] / loop:6.1%}" if name != "other" else "      "
            print(f"{name:>14} {share} of the loop's samples ({v['samples']:>7}), {v['executed']:>10} warp instructions;"
                  f" " + ", ".join(f"{n[6:]} {c / max(1, v['samples']):.0%}" for n, c in top))  # fmt: skip
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
