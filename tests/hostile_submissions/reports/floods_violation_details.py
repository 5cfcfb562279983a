"""Sends 20,000 forged "violation" frames with the guard's own `what` and a distinct detail each: the flags would
hold every one of them."""


def forward(chip, *, Br, Bc, scale):
    for i in range(20000):
        detail = f"/x/{i}/" + "B" * 280
        chip.link.post({"op": "violation", "what": "tried to read the instructor solutions", "detail": detail})
