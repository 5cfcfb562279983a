"""A pass counted from the closed form alone (`flashsim run --counts-only`): no arrays, nothing simulated.

The result is a `Result` (or `Gradients`) like the simulator's, its ledger booking each kernel's closed form
(`sim.machine.iomodel`, the registry's) under the kernel's name, and its SRAM peak the blocks' footprint
(`sim.machine.blocks`). Its cost does not grow with N × Nk: the closed forms sum over the Tr row blocks at most,
so N = 1,000,000 is counted in milliseconds. The tests hold these counts equal to the simulated ledger.
"""

from sim.algorithms import registry
from sim.api.inputs import check_choice, check_positive, configure_shape
from sim.api.results import Gradients, Result
from sim.core.dtypes import DTYPES, F
from sim.core.errors import InputError, SRAMOverflowError
from sim.machine import blocks, iomodel
from sim.machine.ledger import Ledger


def forward(algorithm: str, **shape) -> Result:
    """`sim.count`'s Result, from the closed form: the forward pass of batch × heads heads (`shape`: `count`'s
    keywords, as `counted` takes them)."""
    config, costs = counted(algorithm, False, **shape)
    return Result(**config, **costs, output=None)


def backward(algorithm: str, **shape) -> Gradients:
    """`sim.count_backward`'s Gradients, from the closed form: the backward pass of batch × heads heads."""
    config, costs = counted(algorithm, True, **shape)
    return Gradients(**config, **costs, dq=None, dk=None, dv=None)


def counted(
    algorithm: str, backward: bool, *, n: int, d: int, nk: int | None = None, batch: int = 1, heads: int = 1,
    dtype: str = "fp16", causal: bool = False, scale: float | None = None, block_rows: int | None = None,
    block_cols: int | None = None, blocks: str = "fit", sram_bytes: int | None = None, hardware=None,
) -> tuple[dict, dict]:  # fmt: skip
    """A pass's configuration, checked (`sim.api.inputs.configure_shape`), and its costs by the closed form."""
    from sim.algorithms.registry import get

    if backward and get(algorithm).backward is None:
        raise InputError(f"algorithm: {algorithm} has no backward listing")
    check_choice("dtype", dtype, DTYPES)
    for name, value in (("n", n), ("d", d), ("batch", batch), ("heads", heads)):
        check_positive(name, value)
    nk = n if nk is None else check_positive("nk", nk)
    config = configure_shape(algorithm, backward, batch * heads, n, nk, d, dtype, scale, causal, block_rows,
                             block_cols, blocks, sram_bytes, hardware)  # fmt: skip
    parts = (registry.backward_kernels if backward else registry.kernels)(algorithm, *_shape(config), causal)
    return config, _costs(algorithm, config, parts, backward)


def _shape(config: dict) -> tuple:
    """(N, Nk, d, s, Br, Bc) for `sim.machine.iomodel`."""
    s = DTYPES[config["dtype"]].itemsize
    return config["n"], config["nk"], config["d"], s, config["block_rows"], config["block_cols"]


def _costs(algorithm: str, config: dict, parts: iomodel.Kernels, backward: bool) -> dict:
    """The ledger (each kernel's closed form under its name, for every head) and the SRAM the blocks need."""
    ledger = Ledger()
    for name, c in parts:
        c = c.times(config["heads"])
        ledger.book("hbm", name, "read", c.hbm_read_bytes)
        ledger.book("hbm", name, "write", c.hbm_write_bytes)
        for kind, n in (("matmul", c.flops), ("exp", c.exps), ("elementwise", c.elementwise)):
            ledger.work[kind] += n
    N, Nk, d, s, Br, Bc = _shape(config)
    need = registry.need(algorithm, Br, Bc, d, s, backward=backward)
    if algorithm == "standard":  # its softmax (forward) and line 3 (backward) hold whole rows of the N × Nk matrix
        M = config["sram_bytes"]
        if backward:  # P_i and dP_i in the storage dtype, dS_i (float32) in dP_i's place, and D_i
            row, rows = s * Nk + max(s, F) * Nk + F, blocks.whole_rows
        else:  # a float32 row of S, and m, ℓ
            row, rows = F * (Nk + 2), lambda N, Nk, s, M: blocks.softmax_rows(N, Nk, M)
        try:
            need = max(need, rows(N, Nk, s, M) * row)
        except SRAMOverflowError:  # not one row fits: the simulator refuses this shape, the closed form counts it
            need = max(need, row)
    return {"ledger": ledger, "sram_peak_bytes": need}
