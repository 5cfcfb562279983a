"""`flashsim` run in-process as a user types it, and the one-line error every refusal must be."""

from click.testing import CliRunner

from sim.cli import app


def flashsim(*args, code=0, env=None):
    """`flashsim ARGS` (each argument made a string); its exit code must be `code`."""
    result = CliRunner(env=env).invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.exit_code, result.output)
    return result


def error_line(result) -> str:
    """The whole of stderr: exactly one line, `error: …`, exit code 2 and no traceback."""
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return lines[0]
