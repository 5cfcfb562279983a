"""flashsim's simulator: FlashAttention tile by tile through a model of HBM and SRAM, every byte counted."""

import os

# The simulator multiplies tile-sized matrices (128 × 128 and smaller), where BLAS threads cost more
# than they give: on a busy 2-core machine, 2 threads made the N = 4096 runs 1.4× to 9× slower. Unless the
# user chose otherwise, NumPy's OpenBLAS runs single-threaded (this only takes effect if NumPy is
# imported after sim).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from sim.api.entry import ALGORITHMS, backward, count, count_backward, decode, run
from sim.api.results import Costs, Decoded, Gradients, Packed, Result
from sim.api.ring_api import count_ring, ring
from sim.api.varlen import run_varlen
from sim.core.errors import FlashsimError, InputError, SRAMOverflowError

__all__ = [
    "ALGORITHMS",
    "Costs",
    "Decoded",
    "FlashsimError",
    "Gradients",
    "InputError",
    "Packed",
    "Result",
    "SRAMOverflowError",
    "backward",
    "count",
    "count_backward",
    "count_ring",
    "decode",
    "ring",
    "run",
    "run_varlen",
]
