"""A kernel's launch as the SMs see it, and how many of its thread blocks run at once.

An SM holds as many thread blocks as the scarcest of its threads, registers and shared memory allows
(CUDA C++ Programming Guide, "Occupancy"); the chip runs SMs × that many at once, one *wave*.
"""

from dataclasses import dataclass

from sim.core.errors import InputError
from sim.core.format import human_bytes
from sim.machine.hardware import Hardware

WARP = 32
REGISTER_UNIT = 256  # registers are allocated per warp in units of 256 (Programming Guide, occupancy calculator)


@dataclass(frozen=True)
class Phase:
    """A share of a step's work (one operation of rung 7's warpgroups, `sim.machine.warpgroups.Op`): the shares of a
    block's matmul FLOPs, exponentials and other elementwise operations done in it, and the shared-memory bytes its
    warps and wgmma move per Br × Bc tile pair. The units overlap within it."""

    name: str
    tensor: float = 0.0
    exps: float = 0.0
    elementwise: float = 0.0
    smem: int = 0


@dataclass(frozen=True)
class Launch:
    """What one thread block of a kernel asks of an SM, and what its matmuls run on."""

    threads: int
    smem_bytes: int  # dynamic shared memory per thread block
    registers: int  # 32-bit registers per thread
    instruction: str = "mma.sync"  # "wgmma", "mma.sync" or "fma" (fp32 on the CUDA cores)
    padded_rows: bool = False  # tiles copied into SRAM rows padded by 16 bytes (see l2_to_sm in sim.machine.l2)
    smem_per_tile: int = 0  # shared-memory bytes its warps move to or from registers per Br × Bc tile pair (ldmatrix;
    # rung 7: L_i, D_i, dS_ij, dQ_i beside wgmma, which its `program` splits by operation); 0 where not counted
    dq_adders: int = 1  # backward: times each element of dQ_i is added into the accumulator per step
    dq_bulk: bool = False  # backward: dQ_i added by TMA reduce-adds of SRAM tiles (rung 7), not atomics
    program: object = None  # its warpgroups' step (sim.machine.warpgroups.Program: rung 7); None: tensor + SRAM +
    # max(MUFU, FMA)
    smem_async: int = 0  # with a program: SRAM bytes per tile pair the TMA unit moves beside them (copies, reduce-adds)
    persistent: bool = False  # one thread block per SM walks the tiles (rung 6: `sim.machine.grids.persistent_walk`)
    o_buffer: bool = False  # persistent: O_i leaves by TMA from an SRAM buffer of its own (rung 6's O_BUF), its store
    # under the next tile (`sim.machine.grids.flash2_forward`)
    whole_tiles: bool = False  # its matmuls and exponentials cover whole tiles, a row's statistics on each of a quad's
    # four threads (rung 6: `sim.machine.grids.flash2_forward`); False: the closed form's work

    def describe(self) -> str:
        shared = human_bytes(self.smem_bytes)
        return f"{self.threads} threads, {shared} shared, {self.registers} registers, {self.instruction}"


def capped_registers(threads: int, min_blocks: int = 1) -> int:
    """The registers per thread `__launch_bounds__(threads, min_blocks)` leaves: min_blocks blocks must fit an SM
    of 65,536 registers, rounded down to 8, and never more than 255."""
    return min(255, 65536 // (min_blocks * threads) // 8 * 8)


def blocks_per_sm(launch: Launch, hw: Hardware) -> int:
    """Thread blocks of `launch` one SM holds at once: the fewest that threads, registers or shared memory allow."""
    warps = -(-launch.threads // WARP)
    per_warp = -(-launch.registers * WARP // REGISTER_UNIT) * REGISTER_UNIT
    smem = launch.smem_bytes + hw.smem_reserved_bytes
    fit = min(
        hw.blocks_per_sm,
        hw.threads_per_sm // (warps * WARP),
        hw.registers_per_sm // (per_warp * warps),
        hw.smem_per_sm_bytes // smem if smem else hw.blocks_per_sm,
    )
    if fit < 1:
        raise InputError(f"launch: one thread block ({launch.describe()}) does not fit an SM of {hw.name}")
    return fit


def slots(launch: Launch, hw: Hardware) -> int:
    """Thread blocks the whole chip runs at once: SMs × blocks per SM."""
    return hw.sm_count * blocks_per_sm(launch, hw)


def generic(smem_bytes: int, hw: Hardware, dtype: str) -> Launch:
    """The launch flashsim assumes for a simulated run with no GPU rung named: FlashAttention-2's own kernel shape
    (4 warps, registers for two blocks per SM), its SRAM the run's peak, matmuls on the fastest instruction the part
    has for fp16/bf16 (wgmma on Hopper, else mma.sync) and on the CUDA cores for fp32."""
    if dtype == "fp32":
        instruction = "fma"
    else:
        instruction = "wgmma" if "wgmma" in hw.tensor_per_clock else "mma.sync"
    return Launch(threads=128, smem_bytes=smem_bytes, registers=capped_registers(128, 2), instruction=instruction)
