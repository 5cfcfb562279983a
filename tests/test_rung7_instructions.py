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
    "@P1 BRA `(.L_x_2)",  # 9: the tile's edge test (an edge tile jumps to the masked body)
    "FFMA R1, R2, R3, R4",  # 10: the unmasked body (inner tiles)
    "MUFU.EX2 R1, R1",  # 11
    "BRA `(.L_x_4)",  # 12: over the masked body
    ".L_x_2:",
    "FFMA R1, R2, R3, R4",  # 13: the masked body (edge tiles)
    "MUFU.EX2 R1, R1",  # 14
    "ISETP.GE.AND P2, PT, R2, UR9, PT",  # 15
    "FSEL R1, R1, RZ, !P2",  # 16
    ".L_x_4:",
    "WARPGROUP.DEPBAR.LE gsb0, 0x0",  # 17: wgmma_wait<0>
    "FADD R5, R6, -R7",  # 18
    "F2FP.F16.F32.PACK_AB R8, R5, R1",  # 19
    "BAR.SYNC.DEFER_BLOCKING R14, 0x100",  # 20: turn B
    "STSM.16.MT88.4 [R18+0x14000], R56",  # 21
    "HGMMA.64x64x16.F32 R152, R88, gdesc[UR4].tnspB, R152, gsb0",  # 22: dV_j, dK_j's group ends
    "HGMMA.64x64x16.F32 R24, gdesc[UR16].tnspB, RZ, !UPT, gsb0",  # 23: dQ's
    "BAR.ARV R15, 0x100",  # 24: turn B passed
    "WARPGROUP.DEPBAR.LE gsb0, 0x0",  # 25: the wait for the three
    "STS.64 [R1], R2",  # 26
    "BAR.SYNC.DEFER_BLOCKING R4, 0x80",  # 27: the warpgroup's barrier
    "@P0 BRA `(.L_x_3)",  # 28: threads but 0 skip the reduce-add: warp 0 falls through
    "UTMAREDG.3D.ADD [UR16], [UR6]",  # 29
    ".L_x_3:",
    "IADD3 R1, R1, 0x1, RZ",  # 30
    "@P1 BRA `(.L_x_1)",  # 31: the loop's back branch
    "EXIT",  # 32
    ".L_x_9:",
    "BRA `(.L_x_1)",  # 33: the retry
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
    assert len(code) == 34 and labels[".L_x_2"] == 13 and labels["0xd0"] == 13 and labels[".L_x_4"] == 17
    assert ri.pieces(code, labels) == {
        "S_ijᵀ": [(3, 6)], "dP_ijᵀ": [(6, 7)], "exp": [(7, 17)], "dS_ijᵀ": [(17, 20)], "dV_j, dK_j": [(20, 23)],
        "dQ_i": [(23, 24)], "τ dQ_i → SRAM": [(24, 27)], "loop": [(27, 32), (1, 3)],
    }  # fmt: skip
    counts, edge, taken = ri.step_counts(listing())
    # exp on an inner tile: 7, 8, 9 (falls through), 10, 11, the jump 12 to 17: 6; on an edge tile 7, 8, the test 9
    # taken to 13, 13 … 16: 7. The loop: 27, 28 (falls through), 29, 30, 31 (backward: not taken) and the head 1, 2
    # (the retry falls through): 7
    assert counts == {"S_ijᵀ": 3, "dP_ijᵀ": 1, "exp": 6, "dS_ijᵀ": 3, "dV_j, dK_j": 3, "dQ_i": 1, "τ dQ_i → SRAM": 3,
                      "loop": 7}  # fmt: skip
    assert edge == 7
    # the one branch a warp takes on that path: the jump over the masked body (12 → 17); 2, 9 and 28 fall through,
    # 31 goes back
    assert taken == dict.fromkeys(counts, 0) | {"exp": 1}


def test_samples_by_piece_by_hand(tmp_path):
    # ncu's source page: instruction k has k samples, 2k warp instructions executed, all of them "stall_wait";
    # branches name their target by address, as ncu prints them
    code = [t for t in LISTING if not t.startswith(".L_x")]
    # the instruction each label stands before
    at = {".L_x_1": 1, ".L_x_2": 13, ".L_x_4": 17, ".L_x_3": 30, ".L_x_9": 33}
    rows = ['"Kernel Name","flash2_wgmma_bwd",', '"Address","Source","Warp Stall Sampling (All Samples)",'
            '"Instructions Executed","stall_wait","stall_wait (Not Issued)"']  # fmt: skip
    for k, text in enumerate(code):
        for label, index in at.items():
            text = text.replace(f"`({label})", hex(0x7F00 + 16 * index))
        rows.append(f'"{hex(0x7F00 + 16 * k)}","{text}","{k}","{2 * k}","{k}","0"')
    (tmp_path / "s.csv").write_text("\n".join(rows))
    out = by_piece(str(tmp_path / "s.csv"))
    # sums of the indices in each piece's ranges (test_pieces_and_counts_by_hand): 3 + 4 + 5, 6, 7 + … + 16,
    # 17 + 18 + 19, 20 + 21 + 22, 23, 24 + 25 + 26, 27 + … + 31 + 1 + 2; the rest is "other": 0, 32, 33
    expected = {"S_ijᵀ": 12, "dP_ijᵀ": 6, "exp": 115, "dS_ijᵀ": 54, "dV_j, dK_j": 63, "dQ_i": 23,
                "τ dQ_i → SRAM": 75, "loop": 148, "other": 65}  # fmt: skip
    assert {k: v["samples"] for k, v in out.items()} == expected
    assert {k: v["executed"] for k, v in out.items()} == {k: 2 * v for k, v in expected.items()}
    assert out["exp"]["reasons"] == {"stall_wait": 115}


@pytest.mark.skipif(NVCC is None or ri.nvdisasm() is None, reason="needs nvcc and nvdisasm")
def test_the_recorded_counts_are_the_kernels():
    assert ri.counted() == (ri.COUNTS, ri.EDGE, ri.BRANCHES)


@pytest.mark.skipif(NVCC is None or ri.nvdisasm() is None, reason="needs nvcc and nvdisasm")
def test_the_branch_benchmark_keeps_a_branch_per_element(tmp_path):
    # gpu.lab.rung7_branches measures what it says only if ptxas leaves mask_branch's 64 per-element branches as
    # branches (as in the kernel before run 39) and mask_plain has none: count them in the SASS of each
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
