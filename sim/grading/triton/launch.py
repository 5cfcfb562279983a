"""The assignment's calling convention: which kernels run, on which arguments and grid, and what comes back.

The forward is one launch, `flash2_forward[(Tr,)](Q, K, V, O, L, W, N, Nk, d, scale, BLOCK_M=Br,
BLOCK_N=Bc, BLOCK_D, CAUSAL)`; the backward two, as FlashAttention-2's Algorithm 2 and the
simulator's listing: `flash2_backward_preprocess[(Tr,)](O, dO, D, dQ, N, d, BLOCK_M, BLOCK_D)`
(D = rowsum(dO ∘ O), dQ = 0), then `flash2_backward[(Tc,)](Q, K, V, dO, L, D, dQ, dK, dV, W, N, Nk, d,
scale, BLOCK_M, BLOCK_N, BLOCK_D, CAUSAL)`. BLOCK_D is d rounded up to a power of two (tl.arange needs
one). W is a float32 scratch of N × Nk in HBM that FlashAttention never needs: every byte through
it counts. Outputs start as NaN in the grader's copy, so a row never written shows.
"""

from math import ceil

import numpy as np

from sim.core.dtypes import DTYPES

FORWARD = ("flash2_forward",)
BACKWARD = ("flash2_backward_preprocess", "flash2_backward")


def block_d(d: int) -> int:
    """d rounded up to a power of two, at least 16 (tl.dot's smallest inner size)."""
    return max(16, 1 << (d - 1).bit_length())


def padded(case: dict) -> dict:
    """The case as a program's tiles see it: at least one whole block each way, d rounded up to BLOCK_D
    (the SRAM budget is the simulator listing's peak there)."""
    return {**case, "N": max(case["N"], case["Br"]), "Nk": max(case["Nk"], case["Bc"]), "d": block_d(case["d"])}


def plan(c: dict, inputs: list[str], backward: bool) -> dict:
    """What the submission's process needs for one case: buffers to make, launches to run, results to send."""
    N, Nk, d, dtype = c["N"], c["Nk"], c["d"], c["dtype"]
    sizes = {"BLOCK_M": c["Br"], "BLOCK_N": c["Bc"], "BLOCK_D": block_d(d)}
    scratch = ["W", [N, Nk], "fp32"]
    if backward:
        made = [["D", [N], "fp32"], ["dQ", [N, d], dtype], ["dK", [Nk, d], dtype], ["dV", [Nk, d], dtype], scratch]
        launches = [
            [BACKWARD[0], [ceil(N / c["Br"])], ["O", "dO", "D", "dQ"], [N, d], {k: sizes[k] for k in ("BLOCK_M", "BLOCK_D")}],
            [BACKWARD[1], [ceil(Nk / c["Bc"])], ["Q", "K", "V", "dO", "L", "D", "dQ", "dK", "dV", "W"],
             [N, Nk, d, c["scale"]], {**sizes, "CAUSAL": c["causal"]}],
        ]  # fmt: skip
        results = ["dQ", "dK", "dV"]
    else:
        made = [["O", [N, d], dtype], ["L", [N], "fp32"], scratch]
        launches = [[FORWARD[0], [ceil(N / c["Br"])], ["Q", "K", "V", "O", "L", "W"], [N, Nk, d, c["scale"]],
                     {**sizes, "CAUSAL": c["causal"]}]]  # fmt: skip
        results = ["O", "L"]
    return {"inputs": inputs, "made": made, "launches": launches, "results": results}


def buffer_names(settings: dict) -> list[str]:
    """The arguments in the order the record's rows number them."""
    return [*settings["inputs"], *(m[0] for m in settings["made"])]


def signatures(grading: dict, cases: list[dict] = ()) -> list[tuple[str, dict, dict]]:
    """Each kernel's distinct (name, signature, constexprs) over `cases` (every test's case as graded; without them a
    representative one: fp16 forward, fp32 backward), for compiling to a GPU target: Triton compiles only the
    branches a kernel's constexprs take, so each case's are compiled."""
    backward = grading.get("pass") == "backward"
    dtype = "fp32" if backward else "fp16"
    some = {"N": 256, "Nk": 256, "d": 64, "dtype": dtype, "Br": 64, "Bc": 64, "causal": True, "scale": 0.125}
    out = {}
    for case in cases or [some]:
        settings = plan(case, ["Q", "K", "V", "O", "dO", "L"] if backward else ["Q", "K", "V"], backward)
        for name, _, buffers, scalars, constexprs in settings["launches"]:
            signature = {b: "*" + ("fp32" if b in ("L", "D", "W") else case["dtype"]) for b in buffers}
            names = ("N", "Nk", "d", "scale") if len(scalars) == 4 else ("N", "d")
            signature |= {n: "fp32" if isinstance(s, float) else "i32" for n, s in zip(names, scalars, strict=True)}
            spec = (name, signature | dict.fromkeys(constexprs, "constexpr"), constexprs)
            out.setdefault(repr(spec), spec)
    return list(out.values())


def run(module, header: dict, arrays: list) -> list[np.ndarray]:
    """In the submission's process (imported with TRITON_INTERPRET=1): every launch interpreted on shadow
    buffers; the results, then the record's rows."""
    import triton

    from sim.grading.triton import interpret
    from sim.grading.triton.shadow import Buffer

    buffers = {name: Buffer(name, a) for name, a in zip(header["inputs"], arrays, strict=True)}
    for name, shape, dtype in header["made"]:
        buffers[name] = Buffer(name, np.full(shape, np.nan, DTYPES[dtype]))
    order = buffer_names(header)
    rows, peak = [], (0, -1, 0)
    for name, grid, args, scalars, constexprs in header["launches"]:
        kernel = getattr(module, name, None)
        if not isinstance(kernel, triton.runtime.interpreter.InterpretedFunction):
            raise NameError(f"the kernel file defines no @triton.jit function {name} (or Triton's interpreter is off)")
        record = interpret.launch(kernel, tuple(grid), [buffers[a] for a in args], scalars, constexprs, module.__file__)
        rows += [[order.index(t), direction == "write", line, n] for (t, direction, line), n in record.moved.items()]
        peak = max(peak, record.peak)
    rows.append([-1, peak[1], peak[2], peak[0]])
    return [*(buffers[r].values for r in header["results"]), np.array(rows, dtype=np.float64).reshape(-1, 4)]
