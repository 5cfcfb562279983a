"""Loads Q and scribbles over the tile it got, hoping the grader's Q changes with it; then does nothing."""


def forward(chip, *, Br, Bc, scale):
    N = chip.hbm.tensors["Q"].shape[0]
    tile = chip.load("Q_i", "Q", (0, min(Br, N)))
    tile[:] = 0
    chip.hbm.tensors["Q"].__dict__["shape"] = (0, 0)
