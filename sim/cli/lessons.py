"""`flashsim lessons list|copy`: the lessons where flashsim is installed, and a copy of them to open in Jupyter."""

import json
import shutil
from pathlib import Path

import click
from rich.table import Table

from sim.cli.options import console
from sim.core.errors import InputError
from sim.lab import course


def title(notebook: Path) -> str:
    """A lesson's title: its first heading, without the '# '."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    first = "".join(cells[0]["source"]).splitlines()[0] if cells else notebook.stem
    return first.lstrip("# ").strip()


@click.group("lessons")
def lessons() -> None:
    """The Jupyter lessons: list them, or copy them into a folder of yours."""


@lessons.command("list")
def list_command() -> None:
    """Each lesson, its title and where it is."""
    table = Table(show_edge=False)
    for name in ("lesson", "title"):
        table.add_column(name, overflow="fold")
    for notebook in course.lessons():
        table.add_row(notebook.name, title(notebook))
    console.print(table)
    console.print(
        f"in {course.root()}; `flashsim lessons copy DIR`, then `jupyter lab DIR`", soft_wrap=True, markup=False
    )


@lessons.command("copy")
@click.argument("folder", type=click.Path(file_okay=False))
def copy_command(folder) -> None:
    """Copy every lesson notebook, and its hints, into FOLDER (made if missing); a file already there is left as it is."""
    if not folder:  # Path("") is the current folder: never what an empty argument meant
        raise InputError("folder: an empty folder name")
    target = Path(folder)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"folder: cannot make {folder}: {e.strerror or e}") from None
    copied, kept = [], []
    hints = sorted((course.root() / "hints").glob("*.toml"))
    for source, name in [(n, n.name) for n in course.lessons()] + [(h, f"hints/{h.name}") for h in hints]:
        if (target / name).exists():
            kept.append(name)
            continue
        try:
            (target / name).parent.mkdir(exist_ok=True)
            shutil.copyfile(source, target / name)
        except OSError as e:
            raise InputError(f"folder: cannot write {target / name}: {e.strerror or e}") from None
        copied.append(name)
    copied = [n for n in copied if not n.startswith("hints/")]
    kept = [n for n in kept if not n.startswith("hints/")]
    console.print(f"copied {len(copied)} lessons to {target}" + (f"; kept {len(kept)} already there" if kept else ""),
                  markup=False)  # fmt: skip


COMMANDS = (lessons,)
