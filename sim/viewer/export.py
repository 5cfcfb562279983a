"""The viewer's screens and listings as files: an SVG picture or an HTML page (the trace itself: `Trace.save`).

Both carry the run as their title and use the same dark terminal colours, so a slide and a web page of one
step look alike.
"""

import html
import io
from pathlib import Path

from rich.console import Console, RenderableType
from rich.terminal_theme import SVG_EXPORT_THEME

from sim.core.atomic_file import write_text
from sim.core.errors import InputError

HTML_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="UTF-8">
<title>{title}</title>
<style>
{{stylesheet}}
body {{{{
    color: {{foreground}};
    background-color: {{background}};
}}}}
</style>
</head>
<body>
    <pre style="font-family:'Fira Code',Menlo,'DejaVu Sans Mono',consolas,monospace"><code style="font-family:inherit">{{code}}</code></pre>
</body>
</html>
"""


def write(renderable: RenderableType, path: str | Path, kind: str, width: int, title: str) -> None:
    """Write a renderable as an SVG picture (kind "svg") or an HTML page ("html"), through rich's console export."""
    console = Console(record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor")
    console.print(renderable)
    if kind == "svg":
        text = console.export_svg(title=title, theme=SVG_EXPORT_THEME)
    else:
        text = console.export_html(theme=SVG_EXPORT_THEME, code_format=HTML_PAGE.format(title=html.escape(title)))
    try:
        write_text(path, text)
    except OSError as e:
        raise InputError(f"--{kind}: cannot write {str(path)!r}: {e.strerror}") from None
