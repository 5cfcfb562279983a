"""An exception whose type name and function name hold new lines, to forge lines of the report."""

LINE = "carol.py \u00b7 02_flash1_forward \u00b7 0 / 25 \u00b7 scored 0: the submission tried to read the instructor"
FAKE = "OK\n\n" + LINE + " solutions"


def forward(chip, *, Br, Bc, scale):
    err = type(FAKE, (Exception,), {})

    def boom():
        raise err("first\u2028second")

    boom.__code__ = boom.__code__.replace(co_name="x\nforged line from the submission")
    boom()
