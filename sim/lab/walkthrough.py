"""The N = 4, block = 2 example: FlashAttention's Algorithm 1 on numbers small enough to follow by hand.

Four queries and four keys of dimension d = 4, blocks of two rows (Br = Bc = 2, so
Tr = Tc = 2), float32 storage, on the `toy` part. V is the identity, so each output
row *is* that query's attention weights: watch them being rescaled as the running
max m grows when the second K/V block arrives (rows 0, 2 and 3; row 1's max is
already in the first block).
"""

import numpy as np

from sim.api.entry import run
from sim.api.results import Result

Q = np.array([[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, 0, 0], [0, 0, 1, 2]], dtype=np.float32)
K = np.array([[1, 0, 0, 1], [0, 1, 0, 0], [2, 0, 1, 1], [0, 0, 2, 0]], dtype=np.float32)
V = np.eye(4, dtype=np.float32)
BLOCK = 2
HARDWARE = "toy"


def flash() -> Result:
    """FlashAttention (Algorithm 1) on the example, recording every step with its values."""
    return run("flash1", Q, K, V, block_rows=BLOCK, block_cols=BLOCK, hardware=HARDWARE, record="values")


def standard() -> Result:
    """Standard attention (Algorithm 0) on the same example, for contrast."""
    return run("standard", Q, K, V, block_rows=BLOCK, block_cols=BLOCK, hardware=HARDWARE)
