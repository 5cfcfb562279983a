"""gpu.lab.rung7_instructions and gpu.lab.rung7_stalls: rung 7's step split into pieces at its waits, turns and
barriers, on a listing written by hand (its counts worked out below), and against the kernel where nvdisasm is."""

import pytest

from gpu.lab import rung7_instructions as ri
from gpu.lab.rung7_stalls import by_piece
from tests.test_kernels_compile import NVCC

# a consumer loop in nvdisasm's form, index: what it stands for
LISTING = [
    "MOV R1, R2",  # 0: before the loop
    ".L_x_1:",
    "SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R6+URZ+0x30808], R15",  # 1: the stage's wait (the loop's head)
    "@!P0 BRA `(.L_x_9)",  # 2: its retry, out of line: falls through
    "BAR.SYNC.DEFER_BLOCKING R16, 0x100",  # 3: turn A
    "R2UR UR16, R14",  # 4
    "HGMMA.64x128x16.F32 R88, gdesc[UR16], R88, gsb0",  # 5: S_ijᵀ's group ends
    "HGMMA.64x128x16.F32 R24, gdesc[UR16], R24, gsb0",  # 6: dP_ijᵀ's
    "BAR.ARV R6, 0x100",  # 7: turn A passed
    "WARPGROUP.DEPBAR.LE gsb0, 0x1",  # 8: wgmma_wait<1>
    "FFMA R1, R2, R3, R4",  # 9
    "MUFU.EX2 R1, R1",  # 10
    "@!P1 BRA `(.L_x_2)",  # 11: the mask's branch (taken on an inner tile)
    "ISETP.GE.AND P2, PT, R2, UR9, PT",  # 12: the mask (edge tiles)
    "FSEL R1, R1, RZ, !P2",  # 13
    ".L_x_2:",
    "WARPGROUP.DEPBAR.LE gsb0, 0x0",  # 14: wgmma_wait<0>
    "FADD R5, R6, -R7",  # 15
    "F2FP.F16.F32.PACK_AB R8, R5, R1",  # 16
    "BAR.SYNC.DEFER_BLOCKING R14, 0x100",  # 17: turn B
    "STSM.16.MT88.4 [R18+0x14000], R56",  # 18
    "HGMMA.64x64x16.F32 R152, R88, gdesc[UR4].tnspB, R152, gsb0",  # 19: dV_j, dK_j's group ends
    "HGMMA.64x64x16.F32 R24, gdesc[UR16].tnspB, RZ, !UPT, gsb0",  # 20: dQ's
    "BAR.ARV R15, 0x100",  # 21: turn B passed
    "WARPGROUP.DEPBAR.LE gsb0, 0x0",  # 22: the wait for the three
    "STS.64 [R1], R2",  # 23
    "BAR.SYNC.DEFER_BLOCKING R4, 0x80",  # 24: the warpgroup's barrier
    "@P0 BRA `(.L_x_3)",  # 25: threads but 0 skip the reduce-add: warp 0 falls through
    "UTMAREDG.3D.ADD [UR16], [UR6]",  # 26
    ".L_x_3:",
    "IADD3 R1, R1, 0x1, RZ",  # 27
    "@P1 BRA `(.L_x_1)",  # 28: the loop's back branch
    "EXIT",  # 29
    ".L_x_9:",
    "BRA `(.L_x_1)",  # 30: the retry
]


def listing() -> str:
    lines, k = [], 0
    for text in LISTING:
        if text.startswith(".L_x"):
            lines.append(text)
        else:
            lines.append(f"        /*{16 * k:04x}*/                   {text} ;")
            k += 1
    return "\n".join(lines)


def test_pieces_and_counts_by_hand():
    code, labels = ri.parse(listing())
    assert len(code) == 31 and labels[".L_x_2"] == 14 and labels["0xe0"] == 14
    assert ri.pieces(code, labels) == {
        "S_ijᵀ": [(3, 6)], "dP_ijᵀ": [(6, 7)], "exp": [(7, 14)], "dS_ijᵀ": [(14, 17)], "dV_j, dK_j": [(17, 20)],
        "dQ_i": [(20, 21)], "τ dQ_i → SRAM": [(21, 24)], "loop": [(24, 29), (1, 3)],
    }  # fmt: skip
    counts, edge, taken = ri.step_counts(listing())
    # exp on an inner tile: 7, 8, 9, 10, the branch 11 taken to 14: 5; on an edge tile 7 … 13: 7. The loop: 24, 25
    # (falls through), 26, 27, 28 (backward: not taken) and the head 1, 2 (the retry falls through): 7
    assert counts == {"S_ijᵀ": 3, "dP_ijᵀ": 1, "exp": 5, "dS_ijᵀ": 3, "dV_j, dK_j": 3, "dQ_i": 1, "τ dQ_i → SRAM": 3,
                      "loop": 7}  # fmt: skip
    assert edge == 7
    # the one branch a warp takes on that path: the mask's (11 → 14); 2 and 25 fall through, 28 goes back
    assert taken == dict.fromkeys(counts, 0) | {"exp": 1}


def test_samples_by_piece_by_hand(tmp_path):
    # ncu's source page: instruction k has k samples, 2k warp instructions executed, all of them "stall_wait";
    # branches name their target by address, as ncu prints them
    code = [t for t in LISTING if not t.startswith(".L_x")]
    at = {".L_x_1": 1, ".L_x_2": 14, ".L_x_3": 27, ".L_x_9": 30}  # the instruction each label stands before
    rows = ['"Kernel Name","flash2_wgmma_bwd",', '"Address","Source","Warp Stall Sampling (All Samples)",'
            '"Instructions Executed","stall_wait","stall_wait (Not Issued)"']  # fmt: skip
    for k, text in enumerate(code):
        for label, index in at.items():
            text = text.replace(f"`({label})", hex(0x7F00 + 16 * index))
        rows.append(f'"{hex(0x7F00 + 16 * k)}","{text}","{k}","{2 * k}","{k}","0"')
    (tmp_path / "s.csv").write_text("\n".join(rows))
    out = by_piece(str(tmp_path / "s.csv"))
    # sums of the indices in each piece's ranges (test_pieces_and_counts_by_hand); the rest is "other": 0, 29, 30
    expected = {"S_ijᵀ": 12, "dP_ijᵀ": 6, "exp": 70, "dS_ijᵀ": 45, "dV_j, dK_j": 54, "dQ_i": 20,
                "τ dQ_i → SRAM": 66, "loop": 133, "other": 59}  # fmt: skip
    assert {k: v["samples"] for k, v in out.items()} == expected
    assert {k: v["executed"] for k, v in out.items()} == {k: 2 * v for k, v in expected.items()}
    assert out["exp"]["reasons"] == {"stall_wait": 70}


@pytest.mark.skipif(NVCC is None or ri.nvdisasm() is None, reason="needs nvcc and nvdisasm")
def test_the_recorded_counts_are_the_kernels():
    assert ri.counted() == (ri.COUNTS, ri.EDGE, ri.BRANCHES)


@pytest.mark.skipif(NVCC is None or ri.nvdisasm() is None, reason="needs nvcc and nvdisasm")
def test_the_branch_benchmark_keeps_a_branch_per_element(tmp_path):
    # gpu.lab.rung7_branches measures what it says only if ptxas leaves mask_branch's 64 per-element branches as
    # branches (as in the kernel, BRANCHES) and mask_plain has none: count them in the SASS of each
    import subprocess

    from gpu.lab.rung7_branches import BRANCH_SOURCE, MASK_ELEMENTS
    from gpu.source import INCLUDE, KERNEL_DIR

    cu, cubin = tmp_path / "b.cu", tmp_path / "b.cubin"
    cu.write_text(INCLUDE.sub(lambda line: (KERNEL_DIR / line[1]).read_text(), BRANCH_SOURCE))
    subprocess.run([NVCC, "-cubin", "-arch=sm_90a", "-std=c++17", "-o", str(cubin), str(cu)], check=True)
    sass = subprocess.run([ri.nvdisasm(), "-c", str(cubin)], check=True, capture_output=True, text=True).stdout
    functions = {}
    for part in sass.split("\n.text.")[1:]:
        name, _, body = part.partition(":")
        functions[name] = ri.parse(body)[0]
    branches = {name: sum(op.startswith("BRA") and p for op, p, _ in code) for name, code in functions.items()}
    exps = {name: sum(op == "MUFU.EX2" for op, _, _ in code) for name, code in functions.items()}
    assert exps == {"mask_plain": MASK_ELEMENTS, "mask_branch": MASK_ELEMENTS}
    assert branches["mask_branch"] - branches["mask_plain"] == MASK_ELEMENTS
