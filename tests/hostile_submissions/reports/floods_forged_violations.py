"""Sends 20,000 distinct forged "violation" frames of ~4 KB each, whose `what` is no line of the guard's: once a
36 s grading, a 437 MB grader and a 42 MB flags cell in the CSV and the journal."""


def forward(chip, *, Br, Bc, scale):
    pad = "A" * 1900
    for i in range(20000):
        chip.link.post({"op": "violation", "what": pad + f"{i:08d}", "detail": "B" * 1990})
