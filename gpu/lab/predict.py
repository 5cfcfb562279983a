"""The machine model's prediction (DRAM bytes, time, bound) for a GPU rung, from its launch geometry."""

from gpu.registry import KernelSpec
from gpu.tiling import Tiles, padded_dims
from sim.machine import hardware
from sim.machine.launch import Launch, Phase, capped_registers
from sim.machine.prediction import Prediction, predict


def launch_of(spec: KernelSpec, d: int, tiles: Tiles | None = None) -> Launch:
    """Rung `spec`'s launch at head dim d (its default tiles unless `tiles`): threads, shared memory, the register
    cap its __launch_bounds__ sets (rung 6: the cap for its threads at one block per SM), its matmul instruction and
    its shared-memory rows. Rung 7 (07_flash2_backward_wgmma.cu, "loads" and "dQ"), read from the kernel: L_i and
    D_i come once per Q block, by the producer's bulk copy into the stage with Q_i and dO_i (as the grid books
    them for rung 5); dQ_i goes by TMA reduce-adds of each warpgroup's SRAM tile (by float32 atomics with
    `dq_atomics`), each element once per step with SPLIT_DQ (the default, both d), twice without it."""
    tiles = tiles or spec.default_tiles(d)
    instruction = "wgmma" if spec.tma else ("mma.sync" if spec.tensor_cores else "fma")
    unsplit = spec.tma and spec.direction == "backward" and not tiles.split_dq
    phases, tma = backward_wgmma_phases(d, tiles) if spec.tma and spec.direction == "backward" else ((), 0)
    return Launch(
        threads=tiles.threads,
        smem_bytes=spec.smem(d, tiles),
        registers=capped_registers(tiles.threads, tiles.min_blocks),
        instruction=instruction,
        padded_rows=spec.tensor_cores and not spec.tma and not tiles.swizzle,
        smem_per_tile=smem_per_tile(spec, d, tiles),
        dq_adders=tiles.warps // 4 - 1 if unsplit else 1,
        dq_bulk=spec.tma and spec.direction == "backward" and not tiles.dq_atomics,
        phases=phases,
        smem_async=tma,
        persistent=tiles.persistent and spec.direction == "forward",
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


def backward_wgmma_phases(d: int, t: Tiles) -> tuple[tuple[Phase, ...], int]:
    """Rung 7's step (one Q block) as 07_flash2_backward_wgmma.cu orders it, the phases in series, and the SRAM
    bytes the TMA unit moves beside it. Since run 35-bwd the two consumer warpgroups take turns to issue their
    products (turn A: 1–2 of Q block i; turn B: 4 of block i, dQ of block i − 1), so one's exponentials may overlap
    the other's products; that gained 0–3% (run 35-bwd), and the model still puts the phases in series:
      1. S_ijᵀ = K_j Q_iᵀ: the exponentials need it whole (wgmma_wait<1>);
      2. dP_ijᵀ = V_j dO_iᵀ on the tensor pipe while the exponentials of P_ijᵀ (and τS − L, the mask) run;
      3. dS_ijᵀ = P_ijᵀ ∘ (dP_ijᵀ − D_i), after dP_ijᵀ (wgmma_wait<0>);
      4. dV_j += P_ijᵀ dO_i, dK_j += dS_ijᵀ Q_i, issued together, the dS_ij stores into SRAM meanwhile, then the
         barrier and dQ_i = dS_ij K_j behind them on the tensor pipe (wgmma_wait<0>);
      5. τ dQ_i into SRAM (the TMA reduce-add follows, in flight into the next step).
    Each matmul is 2·Br·Bc·d FLOPs (a fifth of the step's); its SRAM bytes are the operands wgmma reads from SRAM
    (A and B of S_ijᵀ, dP_ijᵀ: each warpgroup its 64 rows of K_j or V_j and all of Q_i or dO_i; B of dV_j, dK_j;
    A and B of each dQ product), with the warps' loads and stores (`backward_wgmma_smem`) in the phase that makes
    them. Elementwise work is `iomodel`'s per tile pair, 4·Br·Bc + Br·d + Bc·d: τS − L and S's mask with the
    exponentials, dP − D and P ∘ with dS, τ·dQ and τ·dK last. The TMA unit writes Q_i, dO_i, L_i, D_i into a stage
    and reads the dQ products out of SRAM beside the phases. Not counted: the conversions to fp16 (their pipe is
    not documented) and every latency (wgmma's, the barriers', a dependent instruction's)."""
    br, bc, s, warps = t.block_rows, t.block_cols, 2, t.warps - 4  # fp16/bf16; the consumer warps
    dq_cols = d if br == 128 else d // 2 if t.split_dq else 64  # as DQ_COLS, DQ_PIECES, DQ_KEYS in the kernel
    pieces, keys = (1, bc) if t.split_dq else (d // 64, 64)
    consumers = bc // 64
    qk = s * d * (bc + consumers * br)  # A: K_j's (V_j's) Bc rows; B: Q_i (dO_i), once per warpgroup
    grads = consumers * 2 * s * br * d  # B of dV_j and dK_j: dO_i, Q_i, once per warpgroup
    dq = consumers * pieces * s * keys * (64 + dq_cols)  # A: dS_ij (64 rows × keys), B: K_j (keys × DQ_COLS)
    work = 4 * br * bc + br * d + bc * d
    half = 2 * br * bc / work  # τS − L (with the mask) or dP − D and P ∘: half of the per-score work
    phases = (
        Phase("S_ijᵀ", tensor=0.2, smem=qk),
        Phase("dP_ijᵀ ∥ exp", tensor=0.2, exps=1.0, elementwise=half, smem=qk + warps * br // 4 * WAVEFRONT),
        Phase("dS_ijᵀ", elementwise=half, smem=warps * br // 8 * WAVEFRONT),
        Phase("dV_j, dK_j, dQ_i", tensor=0.6, smem=grads + dq + warps * br // 16 * 4 * WAVEFRONT),
        Phase("τ dQ_i → SRAM", elementwise=(br + bc) * d / work, smem=warps * pieces * dq_cols // 2 * WAVEFRONT),
    )
    tma = 2 * s * br * d + 2 * 4 * br + consumers * pieces * 4 * 64 * dq_cols
    return phases, tma


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
