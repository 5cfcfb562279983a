"""The viewer's screens and listings as files: an SVG picture or an HTML page (the trace itself: `Trace.save`)."""

import io
from pathlib import Path

from rich.console import Console, RenderableType

from sim.errors import InputError


def write(renderable: RenderableType, path: str | Path, kind: str, width: int, title: str) -> None:
    """Write a renderable as an SVG picture (kind "svg") or an HTML page ("html"), through rich's console export."""
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    console.print(renderable)
    try:
        if kind == "svg":
            console.save_svg(str(path), title=title)
        else:
            console.save_html(str(path))
    except OSError as e:
        raise InputError(f"--{kind}: cannot write {str(path)!r}: {e.strerror}") from None
