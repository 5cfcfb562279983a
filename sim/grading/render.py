"""Rich renderables of grading reports: pure functions, no printing."""

from rich.cells import cell_len
from rich.console import Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from sim.core.format import count, seconds
from sim.grading.report import SubmissionReport, shown_name

STYLES = {"passed": "green", "partial": "yellow", "failed": "red", "not run": "red", "skipped": "dim"}


def submission(report: SubmissionReport, self_check: bool = False) -> Group:
    """One submission: a header line, a table of its tests with feedback, its flags and notes."""
    head = Text.assemble(
        (shown_name(report.submission), "bold"), f" · {report.assignment} · ",
        (f"{report.score:g} / {report.max_score:g}", "bold red" if report.flagged else "bold"),
        f" · seed {report.seed} · {seconds(report.seconds)}",
    )  # fmt: skip
    table = Table(show_edge=False, pad_edge=False, expand=False)
    for name, justify in (
        ("test", "left"),
        ("", "left"),
        ("points", "right"),
        ("status", "left"),
        ("feedback", "left"),
    ):
        table.add_column(name, justify=justify, overflow="fold")
    for t in report.tests:
        table.add_row(
            Text(t.name), "hidden" if t.visibility == "hidden" else "", f"{t.points:g} / {t.max_points:g}",
            Text(t.status, STYLES.get(t.status, "")),
            Group(Text(t.feedback, "default"), Case(t.case)) if t.case else Text(t.feedback, "default"),
        )  # fmt: skip
    parts = [head, table]
    parts += [Text(f"scored 0: the submission {flag}", "bold red") for flag in report.flags]
    parts += [Text(f"for review: {line}", "yellow") for line in report.reviews]
    parts += [Text(note, "yellow") for note in report.notes]
    if self_check:
        parts.append(Text("self-check: the public tests only; the grader also runs hidden tests", "dim"))
    if report.master:
        parts.append(Text(f"graded with {shown_name(report.master)}", "dim"))
    parts.append(Text(f"reproduce this run's cases with --seed {report.seed}", "dim"))
    return Group(*parts)


class Case:
    """A test's case, "[N=55, …, SRAM 4,096 B]", wrapped between its parts only: a narrow column never parts a number
    from its unit ("SRAM 10,240 / B" at 80 columns) or a window's two sides."""

    def __init__(self, text: str):
        self.parts = parts(text)

    def __rich_measure__(self, console, options) -> Measurement:
        whole = cell_len(", ".join(self.parts)) + 2  # with its brackets (and a line's trailing comma)
        return Measurement(min(max(map(cell_len, self.parts)) + 2, whole), whole)

    def __rich_console__(self, console, options):
        lines = [""]
        for part in self.parts:
            joined = f"{lines[-1]}, {part}" if lines[-1] else part
            if lines[-1] and cell_len(joined) + 2 > options.max_width:
                lines[-1] += ","
                lines.append(part)
            else:
                lines[-1] = joined
        yield Text("[" + "\n ".join(lines) + "]", "default")


def parts(text: str) -> list[str]:
    """`text` split at each ", " whose next bracket is not a ")" (not inside "window=(4, 0)"), in one pass from the
    right: a regex's lookahead rescanned the rest of the text at every comma."""
    cuts, after = [], None  # `after`: the first bracket at or after the position looked at
    for i in range(len(text) - 1, -1, -1):
        if text.startswith(", ", i) and after != ")":
            cuts.append(i)
        after = text[i] if text[i] in "()" else after
    cuts.reverse()
    return [text[a:b] for a, b in zip([0, *(c + 2 for c in cuts)], [*cuts, len(text)], strict=True)]


NOTES = 160  # characters of notes a summary row shows (the report of each submission has them all)


def summary(reports: list[SubmissionReport]) -> Table:
    """A folder graded: one row per submission."""
    table = Table(title=f"{len(reports)} submissions", show_edge=False)
    for name, justify in (("submission", "left"), ("score", "right"), ("HBM bytes", "right"), ("notes", "left")):
        table.add_column(name, justify=justify, overflow="fold")
    for r in reports:
        said = [*r.flags, *r.notes, *(f"{t.name}: {t.feedback}" for t in r.tests if t.status in ("failed", "not run"))]
        table.add_row(  # a file's name and what a submission said are text, never markup
            Text(shown_name(r.submission)), f"{r.score:g} / {r.max_score:g}",
            count(r.hbm_bytes) if r.hbm_bytes else "—",
            Text(_shortened(said)),
        )  # fmt: skip
    masters = dict.fromkeys(shown_name(r.master) for r in reports if r.master)
    table.caption = Text(f"graded with {', '.join(masters)}") if masters else None
    return table


def _shortened(said: list[str], room: int = NOTES) -> str:
    """The first two of `said` in about `room` characters, cut between words with "…", and how many more there are
    (red team 96: "follow lines 1–" ended a cell, cut mid-word and unmarked)."""
    more = f" (+{len(said) - 2} more)" if len(said) > 2 else ""
    text = "; ".join(said[:2])
    if len(text) + len(more) > room:
        cut = text.rfind(" ", 0, room - len(more) - 1)
        text = text[: cut if cut > 0 else room - len(more) - 1] + "…"
    return text + more


def bench(report: dict) -> Table:
    """`flashsim bench grade`'s table."""
    m = report["machine"]
    table = Table(title=f"grading {report['submissions']} submissions of {report['assignment']} "
                        f"({m['cpu']}, {m['cores']} cores, {report['jobs']} at a time)", show_edge=False)  # fmt: skip
    for name, justify in (("submissions", "left"), ("count", "right"), ("scores", "left")):
        table.add_column(name, justify=justify)
    for kind, k in report["kinds"].items():
        table.add_row(kind, str(k["count"]), ", ".join(f"{s:g}" for s in k["scores"]))
    per = report["per_submission_seconds"]
    table.add_section()
    table.add_row("all", str(report["submissions"]), f"{seconds(report['seconds'])} in all; per submission "
                  f"{seconds(per['median'])} median, {seconds(per['max'])} at most")  # fmt: skip
    c, load = report["confinement_ms"], report["load_average"]
    table.add_row("confinement", str(c["children"]), f"{c['median']:.1f} ms median a child, {c['max']:.1f} ms at most; "
                  f"load average {load['start']:.1f} → {load['end']:.1f}")  # fmt: skip
    table.caption = report["isolation"]
    return table
