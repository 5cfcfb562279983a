"""Fails the public tests quietly, then in the first hidden test posts a violation whose detail is that test's data
(red team 104): Gradescope's top-level output, which a student sees even where hidden tests are hidden, printed it."""

calls = []


def forward(chip, **kw):
    calls.append(1)
    if len(calls) > 3:
        shapes = {n: t.shape for n, t in chip.hbm.tensors.items()}
        chip.link.post({"op": "violation", "what": "tried to read other submissions",
                        "detail": f"LEAK sram={chip.sram.capacity} {kw} {shapes}"[:200]})  # fmt: skip
    raise RuntimeError("quietly wrong")
