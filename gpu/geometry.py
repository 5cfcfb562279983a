"""Each rung's launch geometry: its default tiling, the #defines its launcher injects, and the shared memory one
thread block allocates (what `gpu.registry`'s KernelSpecs point at; the measurements behind each default are in
gpu/NOTES.md)."""

from gpu.tiling import (
    Tiles,
    backward_tiles,
    backward_warpgroup_tiles,
    forward_tiles,
    pad_to,
    padded_dims,
    warpgroup_tiles,
)
from sim.core.dtypes import F
from sim.core.errors import InputError

STORAGE_CODE = {"float32": 0, "float16": 1, "bfloat16": 2}
HALF_SIZE = 2  # bytes of an fp16/bf16 element: the tensor-core kernels' storage
SOFTMAX_THREADS = 256  # the standard baseline's row kernels


def mma_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    row, d_mma = padded_dims(d)
    return {
        "HEAD_DIM": row,
        "D_MMA": d_mma,
        "NWARPS": tiles.warps,
        "MIN_BLOCKS": tiles.min_blocks,
        "STORAGE": STORAGE_CODE[dtype],
    }


def readable_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    return {
        "HEAD_DIM": d,
        "BR": tiles.block_rows,
        "BC": tiles.block_cols,
        "NTHREADS": tiles.threads,
        "STORAGE": STORAGE_CODE[dtype],
    }


def readable_tiles(d: int) -> Tiles:
    return Tiles(block_rows=32, block_cols=32, warps=4)


def forward_tc_tiles(d: int) -> Tiles:
    """Rungs 2 and 3 by default (the measurements behind each choice: gpu/NOTES.md)."""
    if padded_dims(d)[1] <= 64:
        return forward_tiles(warps=4, m_tiles=2, block_cols=64, min_blocks=2)
    return forward_tiles(warps=4, m_tiles=2, block_cols=32, q_in_regs=False, min_blocks=2)


def forward_rung3_tiles(d: int) -> Tiles:
    """Rung 3 by default: rung 2's, but Bc = 48 for d > 64 (run 9: 342 / 289 TFLOP/s against Bc = 32's 310 / 267)."""
    if padded_dims(d)[1] <= 64:
        return forward_tc_tiles(d)
    return forward_tiles(warps=4, m_tiles=2, block_cols=48, q_in_regs=False, min_blocks=2)


def forward_tc_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    return mma_defines(d, dtype, tiles) | {
        "M_TILES": tiles.m_tiles,
        "BC": tiles.block_cols,
        "Q_IN_REGS": int(tiles.q_in_regs),
        "SWIZZLE": int(tiles.swizzle),
    }


def forward_tc_smem(d: int, tiles: Tiles) -> int:
    """Q_i (Br rows) and two stages each of K_j and V_j (Bc rows), padded or swizzled rows."""
    d_mma = padded_dims(d)[1]
    row = pad_to(d_mma, 64) if tiles.swizzle else d_mma + 8
    return HALF_SIZE * (tiles.block_rows + 4 * tiles.block_cols) * row


def forward_readable_smem(d: int, tiles: Tiles) -> int:
    """Q_i, O_i (Br × d), K_j, V_j (Bc × d), S_ij (Br × Bc), m_i, ℓ_i and the rescale factors (Br), float32."""
    br, bc = tiles.block_rows, tiles.block_cols
    return F * (2 * br * d + 2 * bc * d + br * bc + 3 * br)


def forward_wg_tiles(d: int) -> Tiles:
    """Rung 6 by default, Bc = 128, three stages of K_j/V_j and persistent thread blocks (gpu/NOTES.md, runs 13, 14
    and 35, fp16, N = 4096, TFLOP/s full / causal): d = 64, three consumer warpgroups taking turns (Br = 192,
    ping-pong) 456 / 365 against two warpgroups' 349 / 191; d = 128, two warpgroups without turns 583 / 483 (with
    turns 575 / 468; two stages 456 / 390). One thread block per SM walking the tiles (run 35): +2 … +28% at
    N ≥ 1024, the most where the rows are short."""
    if d == 64:
        return warpgroup_tiles(consumers=3, block_cols=128, stages=3, pingpong=True, persistent=True)
    return warpgroup_tiles(consumers=2, block_cols=128, stages=3, persistent=True)


SHORT_ROWS = 2048  # N up to which rung 6 picks a tiling of its own (forward_wg_shape_tiles)


def forward_wg_shape_tiles(d: int, n: int, causal: bool) -> Tiles:
    """Rung 6's tiling for a call with N query rows: forward_wg_tiles(d), but for N ≤ SHORT_ROWS two warpgroups
    taking turns (Br = 128) at d = 128, and at d = 64 causal (run 35, fp16, ×cuDNN at N = 1024 / 2048: d = 64 causal
    0.84 / 0.89 against Br = 192's 0.75 / 0.87; d = 128 0.90 / 0.93 full and 0.95 / 1.04 causal against 0.89 / 0.91
    and 0.93 / 1.04 without turns), where a tile holds few K/V blocks and the turns hide more of each tile's start."""
    if n <= SHORT_ROWS and (d == 128 or causal):
        return warpgroup_tiles(consumers=2, block_cols=128, stages=3, pingpong=True, persistent=True)
    return forward_wg_tiles(d)


def forward_wg_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    consumers = tiles.warps // 4 - 1
    return {
        "HEAD_DIM": d,
        "BC": tiles.block_cols,
        "CONSUMERS": consumers,
        "STAGES": tiles.stages,
        "PINGPONG": int(tiles.pingpong),
        "PERSISTENT": int(tiles.persistent),
        "O_TMA": int(o_by_tma(d, tiles)),
        "O_BUF": int(o_buffer(d, tiles)),
        "WALK": int(tiles.persistent),
        "TICKETS": int(tickets(d, tiles)),
        "STORAGE": STORAGE_CODE[dtype],
    }


SMEM_OPTIN = 232448  # bytes of shared memory a thread block may ask for on the H100 (sharedMemPerBlockOptin)


def tickets(d: int, tiles: Tiles) -> bool:
    """Rung 6's persistent thread blocks take their units from a ticket (an atomic counter: whichever block is ready
    takes the next unit) at d = 128 with long rows (two warpgroups without turns, N > SHORT_ROWS), and walk units b, b
    + grid, … elsewhere (gpu/NOTES.md run 42-sched15, H100, fp16, against the static walk: d = 128, N = 16384, 8 × 16,
    DRAM read 2365 → 1566 MiB full, 2278 → 1810 causal, time +2.0 … +4.8% at N ≥ 4096, GQA +2.6 … +4.6%; at d = 64,
    where the static walk read each byte once already, −3%, and at N = 1024 −5 … −7%)."""
    return tiles.persistent and d == 128 and not tiles.pingpong


def o_buffer(d: int, tiles: Tiles) -> bool:
    """Rung 6's persistent walk passes O_i through an SRAM buffer of its own (Br rows) where one fits beside Q_i and
    the stages: d = 64 (run 39-fwd4, ×cuDNN, fp16: Br = 192 against stores from registers, N = 1024 full 0.95 → 0.98
    … 1.00, N = 4096 causal 1.00 → 1.06; Br = 128 causal with causal_walk against the tile's last K_j buffer, N = 1024
    0.883 → 0.936, N = 2048 0.935 → 0.983)."""
    return tiles.persistent and _wg_smem(d, tiles) + HALF_SIZE * d * tiles.block_rows <= SMEM_OPTIN


def o_by_tma(d: int, tiles: Tiles) -> bool:
    """Rung 6 stores O_i by TMA (run 37-fwd3: +9% at d = 128, N = 1024, +13% causal, +3 … +6% at N ≥ 4096, against
    stores from registers) where the walk is persistent and O_i fits: in the tile's last K_j buffer (Br ≤ Bc) or in
    a buffer of its own (o_buffer)."""
    return tiles.persistent and (tiles.block_rows <= tiles.block_cols or o_buffer(d, tiles))


def _wg_smem(d: int, tiles: Tiles) -> int:
    barriers = 8 * (2 + 3 * tiles.stages) + (16 if tickets(d, tiles) else 0)  # + the ticketed walk's ring of 2 tiles
    return 1024 + HALF_SIZE * d * (tiles.block_rows + 2 * tiles.stages * tiles.block_cols) + barriers


def forward_wg_smem(d: int, tiles: Tiles) -> int:
    """1024 bytes to align the tiles to the swizzle pattern, Q_i, the stages of K_j and V_j, O_i's buffer where it
    has one (o_buffer), the mbarriers, the ticketed walk's ring of two tiles (i, plane) (`tickets`)."""
    return _wg_smem(d, tiles) + (HALF_SIZE * d * tiles.block_rows if o_buffer(d, tiles) else 0)


def backward_tc_tiles(d: int) -> Tiles:
    """Rung 5 by default: 8 warps of 16 keys (Bc = 128), 64 queries per step."""
    return backward_tiles(warps=8, block_rows=64)


def backward_tc_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    return mma_defines(d, dtype, tiles) | {"BR": tiles.block_rows}


def backward_tc_smem(d: int, t: Tiles) -> int:
    """K_j, V_j (Bc rows), two stages of Q_i, dO_i (Br rows), dS_ijᵀ (Bc × (Br + 8)), two stages of L_i, D_i."""
    row = padded_dims(d)[1] + 8
    br, bc = t.block_rows, t.block_cols
    return HALF_SIZE * (2 * bc * row + 4 * br * row + bc * (br + 8)) + F * 4 * br


def backward_readable_smem(d: int, t: Tiles) -> int:
    """K_j, V_j, dK_j, dV_j (Bc × d), Q_i, dO_i (Br × d), P_ij, dS_ij (Br × Bc), L_i, D_i (Br), float32."""
    br, bc = t.block_rows, t.block_cols
    return F * (4 * bc * d + 2 * br * d + 2 * br * bc + 2 * br)


def backward_wg_tiles(d: int) -> Tiles:
    """Rung 7: two consumer warpgroups of 64 keys (Bc = 128) and a producer, two stages (three measured within ±5%,
    gpu/NOTES.md run 22), dQ_i split between the warpgroups and added by TMA reduce-adds (run 32); Br = 128 queries
    per step at d = 64 (+9 … +18% over Br = 64, run 32), 64 at d = 128 (where 128 leaves too few registers)."""
    return backward_warpgroup_tiles(stages=2, split_dq=True, block_rows=128 if d == 64 else 64)


def backward_wg_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    if tiles.block_rows not in (64, 128) or (tiles.block_rows == 128 and (d != 64 or not tiles.split_dq)):
        raise InputError(f"tiles: rung 7 takes Br = 64, or 128 at d = 64 with split_dq, got d={d}, {tiles.describe()}")
    return {
        "HEAD_DIM": d,
        "BR": tiles.block_rows,
        "STAGES": tiles.stages,
        "SPLIT_DQ": int(tiles.split_dq),
        "DQ_TMA": int(not tiles.dq_atomics),
        "STORAGE": STORAGE_CODE[dtype],
    }


def backward_wg_smem(d: int, t: Tiles) -> int:
    """1024 bytes of alignment, K_j and V_j (Bc rows), the stages of Q_i and dO_i (Br rows), two buffers of dS_ij per
    consumer warpgroup (Br × 64), its float32 dQ product (64 × d / 2 split by columns, 64 × d by rows, else 64 × 64),
    L_i and D_i per stage (Br floats each), the mbarriers."""
    br, bc, consumers = t.block_rows, t.block_cols, t.warps // 4 - 1
    dq_cols = d if br == 128 else d // consumers if t.split_dq else 64
    tiles = HALF_SIZE * (2 * bc * d + 2 * t.stages * br * d + 2 * consumers * br * 64)
    return 1024 + tiles + F * (consumers * 64 * dq_cols + 2 * t.stages * br) + 8 * (1 + 2 * t.stages)


def passes_defines(d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
    """`d` here is the row length in device memory; 16-byte loads when a row is whole 16-byte pieces, one row per
    ROW_LANES lanes in the pre-pass (a lane per 16-byte piece, up to a warp)."""
    size = {"float32": F, "float16": 2, "bfloat16": 2}[dtype]
    wide = d * size % 16 == 0
    pieces = d * size // 16  # WIDE: 16-byte pieces per row, one per lane and step; ROW_LANES: a power of two ≤ 32
    lanes = min(32, 1 << (pieces.bit_length() - 1)) if wide else 32
    return {"HEAD_DIM": d, "STORAGE": STORAGE_CODE[dtype], "WIDE": int(wide), "ROW_LANES": lanes}


def rows_defines(d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
    return {"STORAGE": STORAGE_CODE[dtype], "NTHREADS": SOFTMAX_THREADS}


READ_UNROLL, READ_THREADS, READ_BLOCKS_PER_SM = 8, 256, 16  # read_ceiling.cu's launch shape (gpu/NOTES.md run 41)


def read_defines(d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
    return {"STORAGE": STORAGE_CODE[dtype], "UNROLL": READ_UNROLL}


def handoff_defines(d: int, dtype: str, tiles: Tiles | None = None, handoff: int = 1) -> dict[str, int]:
    """racecheck_probe.cu's build: HANDOFF 0 … 7, how its reads are ordered before its write (the .cu's header)."""
    return {"STORAGE": STORAGE_CODE[dtype], "HANDOFF": handoff}


def probe_defines(d: int, dtype: str, tiles: Tiles | None = None) -> dict[str, int]:
    """d = 64 runs wgmma n128 for S and n64 for O, d = 128 the other way round: the probe covers all four."""
    return {"HEAD_DIM": d, "BC": 192 - d, "STORAGE": STORAGE_CODE[dtype]}


# -- rung 8, Flash-Decoding: R = g·Nq query rows in 16-row tiles, the 4 warps splitting keys (and rows past 16) ----

DECODE_ROW_TILES = (1, 2, 4)  # 16-row MMA tiles of Q per thread block: R ≤ 16, ≤ 32, ≤ 64


def decoding_tiles(d: int, rows: int = 16) -> Tiles:
    """Rung 8's geometry for R = `rows` packed query rows: Bc = 64 keys per tile, 3 cp.async stages of K_j and V_j."""
    m_tiles = next((m for m in DECODE_ROW_TILES if rows <= 16 * m), None)
    if m_tiles is None:
        raise InputError(
            f"q: g·Nq = {rows} query rows per K/V head; Flash-Decoding packs at most 64 (e.g. g = 8, Nq = 8)"
        )
    return Tiles(16 * m_tiles, 64, 4, m_tiles, stages=3)


def decoding_defines(d: int, dtype: str, tiles: Tiles) -> dict[str, int]:
    return {
        "HEAD_DIM": d,
        "STORAGE": STORAGE_CODE[dtype],
        "M_TILES": tiles.m_tiles,
        "NWARPS": tiles.warps,
        "BC": tiles.block_cols,
        "STAGES": tiles.stages,
    }


def decoding_smem(d: int, t: Tiles) -> int:
    """Q (Br rows), then the STAGES stages of K_j, V_j (Bc rows each) or, after the loop, the warps' merge buffers:
    16 rows of O (float32, rows padded by 8 floats) and m, ℓ per warp, and the group's lse_p (rows of d elements,
    swizzled)."""
    row = HALF_SIZE * d
    merge = F * (t.warps * 16 * (d + 8 + 2) + t.block_rows)
    return t.block_rows * row + max(2 * t.stages * t.block_cols * row, merge)
