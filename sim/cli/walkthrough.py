"""`flashsim walkthrough`: the paper's N = 4, block = 2 example, in the trace viewer or as a printed listing."""

import sys

import click

from sim.api import reference
from sim.cli import options
from sim.cli.options import console, emit_json
from sim.cli.progress import Work
from sim.lab import walkthrough
from sim.viz import walkthrough as walkthrough_viz


@click.command("walkthrough")
@options.json_output("the whole trace")
@options.QUIET
def walkthrough_command(as_json, quiet) -> None:
    """FlashAttention step by step on N = 4 queries and keys with blocks of 2 (in a terminal, in the trace viewer,
    after a first screen with the inputs)."""
    with Work(quiet) as work, work.running("recording the walkthrough"):
        flash, standard = walkthrough.flash(), walkthrough.standard()
    if emit_json(flash.trace.to_dict(), as_json):
        return
    ref, _ = reference.attention(walkthrough.Q, walkthrough.K, walkthrough.V)
    if sys.stdin.isatty() and sys.stdout.isatty():  # in a terminal: the trace viewer, then the comparison
        from sim.viewer import terminal
        from sim.viz.timeline import Timeline

        intro = walkthrough_viz.intro(flash, walkthrough.Q, walkthrough.K, walkthrough.V)
        terminal.interact(Timeline(flash.trace), console, intro)
        console.print(walkthrough_viz.ending(flash, standard, ref))
        return
    console.print(walkthrough_viz.walkthrough(flash, standard, ref, walkthrough.Q, walkthrough.K, walkthrough.V))


COMMANDS = (walkthrough_command,)
