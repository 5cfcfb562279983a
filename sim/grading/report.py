"""What grading produced: one result per test, one report per submission."""

from dataclasses import dataclass, field, replace


@dataclass
class TestResult:
    """One test of one submission: points earned of the test's points, and the feedback line."""

    name: str
    visibility: str  # "public" or "hidden"
    points: float
    max_points: float
    status: str  # "passed", "partial", "failed", "not run", "skipped"
    feedback: str
    case: str = ""  # the drawn shape, for reproducing
    hbm_bytes: int | None = None  # booked by the grader, for an IO test with a correct output
    review: str = ""  # why an instructor should look (fewer bytes than any tiling flashsim knows), if so


@dataclass
class SubmissionReport:
    """One submission graded: its tests, its score, and anything that stopped it."""

    submission: str
    assignment: str
    seed: int
    tests: list[TestResult] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # e.g. "tried to read the instructor solutions: …"
    notes: list[str] = field(default_factory=list)  # e.g. why a GPU assignment was not graded here
    printed: str = ""  # the start of what it printed
    seconds: float = 0.0
    confine_ms: list[float] = field(default_factory=list)  # each of its processes' time to confine itself
    master: str = ""  # the assignment file it was graded with (a self-check: the student's copy)

    @property
    def score(self) -> float:
        return 0.0 if self.flagged else sum(t.points for t in self.tests)

    @property
    def max_score(self) -> float:
        return sum(t.max_points for t in self.tests)

    @property
    def flagged(self) -> bool:
        """Whether the submission tried to reach the solutions (scored zero, whatever its tests say)."""
        return bool(self.flags)

    @property
    def reviews(self) -> list[str]:
        """The tests an instructor should look at, each with its figures (the score stands)."""
        return [f"{t.name}: {t.review}" for t in self.tests if t.review]

    @property
    def hbm_bytes(self) -> int | None:
        """HBM bytes of the IO tests with a correct output (None if none): the CSV's column."""
        measured = [t.hbm_bytes for t in self.tests if t.hbm_bytes is not None]
        return sum(measured) if measured else None

    @property
    def public_hbm_bytes(self) -> int | None:
        """The leaderboard's number, which students see: `hbm_bytes` of the public tests alone (red team 109: a
        submission set the sum over the hidden ones too, by loads of its own, to a hidden case's N and Nk)."""
        measured = [t.hbm_bytes for t in self.tests if t.hbm_bytes is not None and t.visibility == "public"]
        return sum(measured) if measured else None


def printable(text: str) -> str:
    """`text` with every character a terminal or a UTF-8 file must not get as it is — a control character (the
    escape that moves a cursor), a format character (a right-to-left override), a lone surrogate — written out as
    its escape (`\\x1b`, `\\u202e`, `\\ud800`); new lines stay. A submission's text passes through it before any
    report shows it."""
    return "".join(c if c.isprintable() or c in " \n" else _escape(c) for c in text)


def shown_name(text: str) -> str:
    """A file's name as `printable` shows it, its line breaks escaped too (`\\n`): a name cannot forge a line."""
    return "".join(c if c.isprintable() or c == " " else _escape(c) for c in text)


def _escape(c: str) -> str:
    return c.encode("unicode_escape", "backslashreplace").decode()


def one_line(text: str) -> str:
    """`text` with every character that starts a new line (`\\n`, `\\r`, `\\v`, `\\f`, `\\x1c`–`\\x1e`, `\\x85`,
    U+2028, U+2029: where `str.splitlines` splits) made a space: a submission's text cannot forge a report's line."""
    return text.translate(_BREAKS)


_BREAKS = dict.fromkeys(map(ord, "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"), " ")


def made_printable(report: SubmissionReport) -> SubmissionReport:
    """The report with every text a submission could have put in it `printable` and, but for what it printed, on one
    line (its file's name is kept: it is the journal's key; whoever shows it makes it printable)."""

    def line(text: str) -> str:
        return printable(one_line(text))

    tests = [replace(t, name=line(t.name), feedback=line(t.feedback), case=line(t.case), review=line(t.review))
             for t in report.tests]  # fmt: skip
    return replace(report, tests=tests, flags=[line(f) for f in report.flags], notes=[line(n) for n in report.notes],
                   printed=printable(report.printed))  # fmt: skip
