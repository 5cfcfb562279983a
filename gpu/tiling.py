"""Launch geometry: Br, Bc, warps and the options of the tensor-core kernels; pure Python, no CuPy."""

from dataclasses import dataclass

from sim.core.errors import InputError

MAX_HEAD_DIM = 128


def pad_to(x: int, multiple: int) -> int:
    """x rounded up to a multiple of `multiple`."""
    return -(-x // multiple) * multiple


def padded_dims(d: int) -> tuple[int, int]:
    """(row length in device memory, MMA width): d padded to 8 (16-byte rows) and to 16 (MMA k)."""
    return pad_to(d, 8), pad_to(d, 16)


@dataclass(frozen=True)
class Tiles:
    """One launch geometry: Br query rows and Bc key rows per step, and how the warps split them."""

    block_rows: int
    block_cols: int
    warps: int
    m_tiles: int = 1  # rungs 2 and 3: 16-row MMA tiles per warp (Br = 16 · m_tiles · warps)
    q_in_regs: bool = True  # rungs 2 and 3: Q_i's MMA fragments stay in registers for the whole K/V loop
    min_blocks: int = 1  # tensor-core kernels: thread blocks per SM the register allocation must leave room for
    swizzle: bool = False  # rungs 2 and 3: XOR-swizzled shared-memory rows instead of rows padded by 16 bytes
    stages: int = 2  # rung 6: K_j/V_j stages in SRAM; backward rung 7: Q_i/dO_i stages (the others: 2)
    pingpong: bool = False  # rung 6: consumer warpgroups take turns issuing their matmuls
    persistent: bool = False  # rung 6: one thread block per SM walks the tiles (all calls but softcap, ALiBi)
    split_dq: bool = False  # backward rung 7: the warpgroups share dS_ij and split dQ_i's columns
    dq_atomics: bool = False  # backward rung 7: dQ by float32 atomics per element instead of TMA reduce-adds
    dq_pass: bool = False  # backward rung 7: dQ rounded by a third launch, not by the last thread block to add into it

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def describe(self) -> str:
        """The tiling in one short string: Br×Bc, warps × rows per warp, where Q_i's fragments live, layout."""
        # backward rung 7 (Br = 128 only split: rung 6's (128, 128, 12 warps) forward tiles never split dQ)
        if self.warps == 12 and self.block_cols == 128 and (self.block_rows == 64 or self.split_dq):
            return f"{self.block_rows}x128 wg2x64keys+1 st{self.stages}{' splitdq' if self.split_dq else ''}{' atomics' if self.dq_atomics else ''}{' dqpass' if self.dq_pass else ''}"
        backward_mma = self.block_cols == 16 * self.warps  # rung 5's 16 keys per warp (not rung 6's warpgroups)
        if not backward_mma and self.warps % 4 == 0 and self.block_rows == 64 * (self.warps // 4 - 1):
            return f"{self.block_rows}x{self.block_cols} wg{self.warps // 4 - 1}x64+1 st{self.stages}{' pp' if self.pingpong else ''}{' ps' if self.persistent else ''}"
        rows = f"w{self.warps}x{self.block_rows // self.warps}"
        return f"{self.block_rows}x{self.block_cols} {rows} {'qreg' if self.q_in_regs else 'qsmem'} mb{self.min_blocks} {'swz' if self.swizzle else 'pad'}"


def forward_tiles(
    warps: int, m_tiles: int, block_cols: int, q_in_regs: bool = True, min_blocks: int = 1, swizzle: bool = False
) -> Tiles:
    """A forward tensor-core geometry: each warp owns 16 · m_tiles query rows, so Br = 16 · m_tiles · warps."""
    return Tiles(16 * m_tiles * warps, block_cols, warps, m_tiles, q_in_regs, min_blocks, swizzle)


def warpgroup_tiles(
    consumers: int, block_cols: int, stages: int, pingpong: bool = False, persistent: bool = False
) -> Tiles:
    """A rung 6 geometry: `consumers` warpgroups of 64 query rows (Br = 64 · consumers) and one producer;
    `persistent`: at most one thread block per SM, each walking a share of the tiles."""
    return Tiles(
        64 * consumers, block_cols, 4 * (consumers + 1), stages=stages, pingpong=pingpong, persistent=persistent
    )


def backward_warpgroup_tiles(
    stages: int, split_dq: bool = False, dq_atomics: bool = False, block_rows: int = 64
) -> Tiles:
    """The backward rung 7 geometry: two consumer warpgroups of 64 keys (Bc = 128), a producer, Br = `block_rows`
    queries per step (64, or 128 at d = 64 with split_dq), `stages`; `split_dq`: the warpgroups share dS_ij and each
    computes half of dQ_i (its columns; with Br = 128 its rows); `dq_atomics`: dQ added with float32 atomics per
    element instead of one TMA reduce-add per 32 columns."""
    return Tiles(block_rows, 128, 12, stages=stages, split_dq=split_dq, dq_atomics=dq_atomics)


def backward_tiles(warps: int, block_rows: int, min_blocks: int = 1) -> Tiles:
    """A backward tensor-core geometry: each warp owns 16 keys (Bc = 16 · warps); Br queries per step."""
    query_tiles = block_rows // 16
    if block_rows % 16 or (warps % query_tiles and query_tiles % warps):
        raise InputError(
            f"tiles: Br must be a multiple of 16 whose 16-row tiles divide the warps or are divided by them, got Br={block_rows}, {warps} warps"
        )
    return Tiles(block_rows, 16 * warps, warps, min_blocks=min_blocks)
