"""`flashsim` as a new user types it (a pass over the CLI whose fixes were lost, made again): one test per finding,
each failing before its fix (the 80-column walkthrough, already fixed, is test_viewer's)."""

import pytest

import sim
from sim.lab import walkthrough
from sim.viz.timeline import Timeline
from tests.cli_runner import error_line, flashsim

LARGEST = "9,007,199,254,740,992"  # 2⁵³, the largest size an option or a --load trace takes
WALKTHROUGH = Timeline(walkthrough.flash().trace)  # 28 steps


def flat(text: str) -> str:
    """`text` with its wrapping undone: every run of whitespace one space."""
    return " ".join(text.split())


# -- 1: --json naming a folder -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["run", "--n", 64], ["trace", "--n", 8]])
def test_json_naming_a_folder_is_refused_before_any_work(command, tmp_path, monkeypatch):
    """A folder is not a regular file, so `special` took it for a device: written after the work, refused then as
    "error: DIR: Is a directory", naming no option."""
    monkeypatch.setattr(sim, "run", lambda *a, **k: pytest.fail("the work ran"))
    for folder in (str(tmp_path), f"{tmp_path}/"):
        line = error_line(flashsim(*command, "--json", folder, code=2))
        assert line == f"error: flashsim {command[0]}: Invalid value for '--json': {folder!r} is a folder, not a file"
