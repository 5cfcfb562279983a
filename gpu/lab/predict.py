"""The machine model's prediction (DRAM bytes, time, bound) for a GPU rung, from its launch geometry."""

from dataclasses import replace

from gpu import geometry
from gpu.lab.rung7_instructions import BRANCHES, COUNTS
from gpu.registry import KernelSpec
from gpu.tiling import Tiles, padded_dims
from sim.machine import hardware
from sim.machine.launch import Launch, Phase, capped_registers
from sim.machine.prediction import Prediction, predict
from sim.machine.warpgroups import Op, Program


def launch_of(spec: KernelSpec, d: int, tiles: Tiles | None = None) -> Launch:
    """Rung `spec`'s launch at head dim d (its default tiles unless `tiles`): threads, shared memory, the register
    cap its __launch_bounds__ sets (rung 6: the cap for its threads at one block per SM), its matmul instruction and
    its shared-memory rows. Rung 7 (07_flash2_backward_wgmma.cu, "loads" and "dQ"), read from the kernel: L_i and
    D_i come once per Q block, by the producer's bulk copy into the stage with Q_i and dO_i (as the grid books
    them for rung 5); dQ_i goes by TMA reduce-adds of each warpgroup's SRAM tile (by float32 atomics with
    `dq_atomics`), each element once per step with SPLIT_DQ (the default, both d), twice without it. Rung 6: its
    shared memory holds O_i's own buffer where one fits (geometry.o_buffer, O_BUF: d = 64), and O_i then leaves
    through it (`Launch.o_buffer`); its causal walk is the launcher's list (`sim.machine.grids.causal_walk`); its
    work is its whole tiles' (`Launch.whole_tiles`: ncu's MUFU count, run 40-model9)."""
    tiles = tiles or spec.default_tiles(d)
    instruction = "wgmma" if spec.tma else ("mma.sync" if spec.tensor_cores else "fma")
    unsplit = spec.tma and spec.direction == "backward" and not tiles.split_dq
    program, tma = backward_wgmma_program(d, tiles) if spec.tma and spec.direction == "backward" else (None, 0)
    return Launch(
        threads=tiles.threads,
        smem_bytes=spec.smem(d, tiles),
        registers=capped_registers(tiles.threads, tiles.min_blocks),
        instruction=instruction,
        padded_rows=spec.tensor_cores and not spec.tma and not tiles.swizzle,
        smem_per_tile=smem_per_tile(spec, d, tiles),
        dq_adders=tiles.warps // 4 - 1 if unsplit else 1,
        dq_bulk=spec.tma and spec.direction == "backward" and not tiles.dq_atomics,
        program=program,
        smem_async=tma,
        persistent=tiles.persistent and spec.direction == "forward",
        o_buffer=spec.tma and spec.direction == "forward" and geometry.o_buffer(d, tiles),
        whole_tiles=spec.tma and spec.direction == "forward",
    )


LDMATRIX_X4 = 4 * 128  # bytes one warp's ldmatrix.x4 moves: four 8 × 8 matrices of 16-bit elements
WAVEFRONT = 128  # bytes of one shared-memory access by a warp (a 32-bit load or store of 32 lanes)


def smem_per_tile(spec: KernelSpec, d: int, t: Tiles) -> int:
    """Shared-memory bytes a rung's warps move to or from registers per Br × Bc tile pair, counted from its loops
    (the kernels' comments name each operand): the mma.sync rungs' operand loads; rung 7's loads and stores beside
    wgmma (which reads its operands itself); 0 for rung 6 and the readable rungs (not counted)."""
    if spec.tma and spec.direction == "backward":
        return backward_wgmma_smem(d, t)
    if not spec.tensor_cores or spec.tma:
        return 0
    k = padded_dims(d)[1] // 16  # 16-wide k-steps over d (and 16-column pairs of O_i, dK_j, dV_j, dQ_i)
    if spec.direction == "forward":  # rungs 2, 3: per warp, K_j for S = Q_i K_jᵀ (Q_i too when not in registers)
        qk = k * (t.block_cols // 16 + (0 if t.q_in_regs else t.m_tiles))
        pv = (t.block_cols // 16) * k  # V_j for O_i += P̃_ij V_j
        return t.warps * (qk + pv) * LDMATRIX_X4
    # rung 5, per warp: K_j (or V_j) once and Q_i (or dO_i) per query pair for Sᵀ = K_j Q_iᵀ and dPᵀ = V_j dO_iᵀ;
    # dO_i, Q_i for dV_j, dK_j; dS_ij and K_j for dQ_i; L_i, D_i per score; dS_ijᵀ stored
    br, bc, warps = t.block_rows, t.block_cols, t.warps
    qm = br // 16
    groups, mt = (warps // qm, 1) if warps >= qm else (1, qm // warps)
    loads = 2 * k * (1 + br // 16) + 2 * (br // 16) * k + mt * (bc // 16) * (1 + -(-k // groups))
    return warps * (loads * LDMATRIX_X4 + (2 * (br // 8) * 4 + 2 * (br // 8)) * WAVEFRONT)


def backward_wgmma_smem(d: int, t: Tiles) -> int:
    """Rung 7, per Q block step, each consumer warp (07_flash2_backward_wgmma.cu; the instruction counts are its
    PTX's, `nvcc -ptx -arch=sm_90a`, one wavefront of 128 bytes each unless said): L_i·log2 e and D_i for line 11
    and 14, Br / 4 scalar loads and Br / 8 two-float loads (a warp's lanes read 4 or 8 neighbouring floats: one
    wavefront); dS_ij into SRAM, Br / 16 stmatrix.x4.trans (four 8 × 8 matrices of 16-bit elements, 512 bytes:
    four wavefronts; run 35-bwd, before it Br / 2 16-bit stores); its dQ products, 2 · DQ_COLS / 8 two-float stores
    each (256 bytes: two)."""
    br, warps = t.block_rows, t.warps - 4  # the consumer warps (warpgroup 0 only issues copies)
    dq_cols = d if br == 128 else d // 2 if t.split_dq else 64  # as DQ_COLS, DQ_PIECES in the kernel
    pieces = 1 if t.split_dq else d // 64
    wavefronts = br // 4 + br // 8 + br // 16 * 4 + pieces * (dq_cols // 4) * 2
    return warps * wavefronts * WAVEFRONT


def backward_wgmma_program(d: int, t: Tiles) -> tuple[Program, int]:
    """Rung 7's step (one Q block) as each consumer warpgroup of 07_flash2_backward_wgmma.cu runs it, and the SRAM
    bytes the TMA unit moves beside it per tile pair. The warpgroups take turns to issue their products (named
    barriers 4 and 5; warpgroup 1 passes first), order A0 A1 B0 B1:
      wait for the stage (FULL); turn A: issue S_ijᵀ = K_j Q_iᵀ and dP_ijᵀ = V_j dO_iᵀ (two groups), pass;
      wgmma_wait<1> (S_ijᵀ); the exponentials of P_ijᵀ (τS − L, L_i from SRAM); wgmma_wait<0> (dP_ijᵀ);
      dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i), both converted to fp16; the last reduce-add has read its dQ tile;
      turn B: dS_ij into SRAM (stmatrix), issue dV_j, dK_j (one group) and dQ of the Q block before (dS_ij of both
      warpgroups; one group), pass, wait for the three (run 37-bwd3's one wait), hand the stage back (EMPTY), τ dQ
      into SRAM, reduce-add it; the loop's bookkeeping.
    With DQ_PIECES > 1 (unsplit dQ at d = 128) dV_j, dK_j are waited for inside turn B, the stage handed back, then
    d / 64 dQ products through one register tile (the turn passed after the first), each waited for, stored and
    reduce-added. Each warpgroup computes its 64 keys: half of S_ijᵀ, dP_ijᵀ, dV_j, dK_j and of the exponentials
    and elementwise work; with SPLIT_DQ half of dQ_i, else its own keys' share of all of it. A matmul is 2·Br·Bc·d
    FLOPs (a fifth of the step's); its SRAM bytes are the operands wgmma reads from SRAM (A and B of S_ijᵀ, dP_ijᵀ:
    its 64 rows of K_j or V_j and all of Q_i or dO_i; B of dV_j, dK_j; A and B of each dQ product), the warps'
    loads and stores (`backward_wgmma_smem`) in the operation that makes them. Elementwise work is `iomodel`'s per
    tile pair, 4·Br·Bc + Br·d + Bc·d: τS − L and S's mask with the exponentials, dP − D and P ∘ with dS, τ·dQ and
    τ·dK last. Each Work also carries the instructions a warp issues in it, counted from the build's SASS
    (`gpu.lab.rung7_instructions.COUNTS`, an inner tile's: the mask's branches, conversions, descriptors and
    address math included; the descriptors and wgmma instructions of a group in a Work before its issue), and the
    exponentials' Work the branches its warps take (one on an inner tile, over line 11's masked body: `BRANCHES`);
    the Works that end in `fence.proxy.async` name it (dS_ij's stores, τ dQ's: `Hardware.fence_clocks`' keys):
    the default builds only, other tilings' Works run at the units' rates. The groups are named as `python -m
    gpu.lab.calibrate` times them. Not counted: the mask's extra instructions on edge tiles (`EDGE`), the dropped
    dQ product at it = 0, DETERMINISTIC's turns per Q block (not on issue 22's grid)."""
    br, bc, s = t.block_rows, t.block_cols, 2  # fp16/bf16
    dq_cols = d if br == 128 else d // 2 if t.split_dq else 64  # as DQ_COLS, DQ_PIECES, DQ_KEYS in the kernel
    pieces, keys = (1, bc) if t.split_dq else (d // 64, 64)
    consumers, warps = bc // 64, 4  # consumer warpgroups, warps in each
    default = t == geometry.backward_wg_tiles(d)
    n = COUNTS.get((d, br), {}) if default else {}  # instructions per warp in each piece of the step
    taken = BRANCHES.get((d, br), {}) if default else {}  # branches a warp takes in it
    work = 4 * br * bc + br * d + bc * d
    half = 2 * br * bc / work / consumers  # one warpgroup's τS − L (with the mask), or its dP − D and P ∘
    qk = s * d * (64 + br)  # A: its 64 rows of K_j (V_j); B: Q_i (dO_i)
    lds, wave = br // 4, WAVEFRONT  # L_i: Br / 4 wavefronts a warp (then D_i: Br / 8)
    matmul = 1 / 5 / consumers  # a warpgroup's share of one of the step's five matmuls

    def issuing(piece: str) -> tuple[Op, ...]:
        """A group's descriptors and wgmma instructions, issued before it is on the tensor pipe."""
        return (Op("work", instructions=n[piece]),) if n.get(piece) else ()

    scores = Op("issue", f"ss m64n{br}k16 x{d // 16}", phase=Phase("S_ijᵀ", tensor=matmul, smem=qk))
    dq = Op("issue", f"ss-nmajor m64n{dq_cols}k16 x{keys // 16}",
            phase=Phase("dQ_i", tensor=matmul / pieces, smem=s * keys * (64 + dq_cols)))  # fmt: skip
    store = Op("work", instructions=n.get("τ dQ_i → SRAM", 0), fence="τ dQ_i",
               phase=Phase("τ dQ_i → SRAM", elementwise=(br + bc) * d / work / consumers / pieces,
                           smem=warps * dq_cols // 2 * wave))  # fmt: skip
    reduce = () if t.dq_atomics else (Op("reduce"),)
    read = (Op("reduce_wait"),) if reduce else ()
    grads = Op("issue", f"rs m64n{d}k16 x{2 * br // 16}",
               phase=Phase("dV_j, dK_j", tensor=2 * matmul, smem=2 * s * br * d))  # fmt: skip
    stored = Op("work", instructions=n.get("dV_j, dK_j", 0), fence="dS_ij",
                phase=Phase("dS_ij → SRAM", smem=warps * br // 16 * 4 * wave))  # fmt: skip
    if pieces == 1:  # turn B: dV_j, dK_j and dQ issued back to back, the turn passed, one wait for the three
        turn_b = (stored, grads, *issuing("dQ_i"), dq, Op("turn_pass"), Op("wait"), Op("empty"), store, *reduce)
    else:  # dV_j, dK_j waited for in the turn, then the dQ pieces through one register tile
        turn_b = (stored, grads, Op("wait"), Op("empty"), dq, Op("turn_pass"), Op("wait"), store, *reduce)
        for _ in range(pieces - 1):
            turn_b += (*read, dq, Op("wait"), store, *reduce)
    step = (
        Op("full"), Op("turn_wait"), *issuing("S_ijᵀ"), scores, *issuing("dP_ijᵀ"),
        replace(scores, phase=replace(scores.phase, name="dP_ijᵀ")), Op("turn_pass"), Op("wait", pending=1),
        Op("work", instructions=n.get("exp", 0), branches=taken.get("exp", 0),
           phase=Phase("exp", exps=1 / consumers, elementwise=half, smem=warps * lds * wave)),
        Op("wait"),
        Op("work", instructions=n.get("dS_ijᵀ", 0), phase=Phase("dS_ijᵀ", elementwise=half, smem=warps * br // 8 * wave)),
        *read, Op("turn_wait"), *turn_b, *issuing("loop"),
    )  # fmt: skip
    program = Program(first=((), (Op("turn_pass"),)), step=(step, step), stage=f"d{d} br{br}")
    tma = 2 * s * br * d + 2 * 4 * br + consumers * pieces * 4 * 64 * dq_cols
    return program, tma


def rung_prediction(
    spec: KernelSpec, hw: hardware.Hardware, *, n, nk, d, batch, heads, s, causal, tiles: Tiles | None = None
) -> Prediction:
    """The prediction for rung `spec` (forward or backward) on one shape, with the blocks its launcher picks for the
    shape (or `tiles`)."""
    tiles = spec.tiles_for(d, n, causal, tiles)
    return predict(
        "flash2", n, nk, d, s, tiles.block_rows, tiles.block_cols, causal, batch * heads, hw, launch_of(spec, d, tiles),
        backward=spec.direction == "backward",
    )  # fmt: skip
