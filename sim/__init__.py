"""flashsim's simulator: FlashAttention tile by tile through a model of HBM and SRAM, every byte counted."""

from sim.api import ALGORITHMS, Decoded, Gradients, Result, backward, count, count_backward, decode, run
from sim.errors import FlashsimError, InputError, SRAMOverflowError

__all__ = [
    "ALGORITHMS", "Decoded", "FlashsimError", "Gradients", "InputError", "Result", "SRAMOverflowError",
    "backward", "count", "count_backward", "decode", "run",
]
