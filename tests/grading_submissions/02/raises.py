"""Divides by zero on line 6."""


def forward(chip, *, Br, Bc, scale):
    N = chip.hbm.tensors["Q"].shape[0]
    return N // 0
