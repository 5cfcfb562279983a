"""One name per kernel: its rung. --kernel takes the rung number; the old v-names still work, with one line of warning."""

import pytest

from sim.cli import options


@pytest.mark.parametrize(
    ("given", "backward", "rung"),
    [("v1", False, 1), ("v2", False, 2), ("v3", False, 3), ("v4", False, 6), ("v1", True, 4), ("v2", True, 5)],
)
def test_an_old_name_is_its_rung_with_one_line_of_warning(capsys, given, backward, rung):
    assert options.rung(given, backward) == rung
    err = capsys.readouterr().err
    assert (
        err
        == f"warning: --kernel {given} is the old name of rung {rung}: write --kernel {rung} (the v-names go in the next release)\n"
    )


@pytest.mark.parametrize("given", ["1", "2", "3", "4", "5", "6"])
def test_a_rung_number_is_taken_as_it_is_and_silently(capsys, given):
    assert options.rung(given) == int(given)
    assert options.rung(None) is None
    assert capsys.readouterr().err == ""
