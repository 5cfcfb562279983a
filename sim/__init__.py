"""flashsim's simulator: FlashAttention tile by tile through a model of HBM and SRAM, every byte counted."""

from sim.api import ALGORITHMS, Result, count, run
from sim.errors import FlashsimError, InputError, SRAMOverflowError

__all__ = ["ALGORITHMS", "FlashsimError", "InputError", "Result", "SRAMOverflowError", "count", "run"]
