"""Single-file submissions made from the ones in 02/: Algorithm 1 with a wasteful switch on, and a forger."""

from pathlib import Path

HERE = Path(__file__).parent / "02"

FORGERY = '''

def forward(chip, *, Br, Bc, scale):
    """FlashAttention-2's loop order with forged numbers: a doctored local ledger, and O placed in HBM directly."""
    N, d = chip.hbm.tensors["Q"].shape
    try:
        chip.hbm.place("O", np.zeros((N, d)))
    except Exception:
        pass
    _honest(chip, Br=Br, Bc=Bc, scale=scale)
    chip.ledger.bytes.clear()
    chip.ledger.hbm_read_bytes = chip.ledger.hbm_write_bytes = 1
'''


def algorithm1(folder: Path, switch: str) -> Path:
    """02/algorithm1.py with one of its switches (REREAD_KV, WRITE_S, KEEP_S) turned on."""
    text = (HERE / "algorithm1.py").read_text()
    assert f"{switch} = False" in text
    path = folder / f"{switch.lower()}.py"
    path.write_text(text.replace(f"{switch} = False", f"{switch} = True"))
    return path


def forger(folder: Path) -> Path:
    """02/fa2_loop_order.py renamed _honest, behind a forward that forges what it can."""
    text = (HERE / "fa2_loop_order.py").read_text()
    path = folder / "forges.py"
    path.write_text(text.replace("def forward(chip", "def _honest(chip") + FORGERY)
    return path
