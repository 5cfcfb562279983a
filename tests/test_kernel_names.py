"""One name per kernel: its rung. --kernel takes the rung number; an old v-name is refused in one line naming its rung."""

import pytest
from click.testing import CliRunner

from sim.cli import app

OLD = "is an old name: write the rung number (forward v1, v2, v3, v4 are rungs 1, 2, 3, 6; backward v1, v2 are rungs 4, 5)"


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "gpu", "--kernel", "v4"],
        ["bench", "gpu", "--quick", "--kernel", "v2"],
        ["compare", "--kernel", "v3"],
        ["compare", "--backward", "--kernel", "v1"],
    ],
)
def test_an_old_name_is_refused_in_one_line_with_exit_2(args):
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert f"{args[-1]} {OLD}" in lines[0]


@pytest.mark.parametrize(
    ("args", "shown"),
    [(["bench", "gpu"], "'2', '3', '6'"), (["compare"], "'1', '2', '3', '6', '4', '5', '7'")],
)
def test_an_unknown_rung_is_refused_naming_the_choices(args, shown):
    result = CliRunner().invoke(app, [*args, "--kernel", "9"])
    assert result.exit_code == 2
    assert (
        result.stderr == f"error: flashsim {' '.join(args)}: Invalid value for '--kernel': '9' is not one of {shown}.\n"
    )
