"""The similarity report: submissions whose code is close to the library's own listing, to the instructor's
master, or to another submission of the batch — flags for a person to review, never a penalty.

Each file is put in its normal form (`normal_form`: parsed and printed back; control statements' headers,
statements that do nothing and assignments nothing reads taken out), then becomes a normalized token sequence
(Python's tokenizer: comments, layout and `;` dropped, and statements that do nothing — `pass`, docstrings, a lone
constant; every identifier one token `v` except attribute names such as `.load`; numbers `0`, strings `s`), so
renaming variables, rewording comments, reformatting, joining lines with `;`, padding with `pass` or dead
assignments, or wrapping lines in `if True:` changes nothing. Its fingerprint is
the set of hashed runs of K tokens, less every run the handout itself contains (every student starts from it). Two
submissions score the runs they share over the larger file's runs (1.0: the same code), and a pair at or above
THRESHOLD is flagged on both; where one file holds THRESHOLD of a smaller one's runs but is not that close to it
(one pasted the other's code into more, or trimmed a copy: the files cannot say which), the larger is noted as
holding the smaller's code and the smaller as found in the larger, neither accused. A submission against a
reference (the master, the listing, which copied nobody) scores the share of the smaller found in the other. A file
with at least MIN_RUNS runs of its own is judged; one with fewer that scored points is said to be "not judged" (a
one-line `exec` of a compressed copy is all of 20 tokens), and one that calls exec, eval, compile or __import__ on
anything but a literal is named for review: the code it runs is built at run time, where no comparison of files can
see it. The submissions are read by a child process (`code_reading`): Python's parser holds the GIL.
"""

import ast
import io
import keyword
import tokenize
import unicodedata
import zlib
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from sim.grading import code_reading, normal_form, submission_file
from sim.grading.report import one_line, printable, shown_name

K = 12  # tokens a run: long enough that two independent solutions rarely share many
THRESHOLD = 0.8
MIN_RUNS = 100  # fewer runs of a student's own: too little code to judge (assignment 01's ~80: one way to write it)
ALGORITHMS = Path(__file__).resolve().parents[1] / "algorithms"
_STRINGS = {getattr(tokenize, n, tokenize.STRING) for n in ("STRING", "FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END")}
RUNS_CODE = frozenset(("exec", "eval", "compile", "__import__"))  # builtins that run (or load) code given as data
TABLES = frozenset(("__builtins__", "vars", "globals", "locals", "__dict__", "__globals__", "__subclasses__"))
LOADERS = frozenset(
    """builtins importlib code codeop runpy pickle marshal ctypes zlib lzma bz2 gzip base64 binascii""".split()
)  # modules that run code, or unpack what a file hides (not sys: red team 93; its .exec is named anyway)
NOT_JUDGED = f"similarity not judged: too little code to compare (fewer than {MIN_RUNS} runs of its own)"
_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING}


@dataclass(frozen=True)
class Flag:
    """Two files whose code is close: `a` a submission, `b` another or a reference ("the library's listing …")."""

    a: str
    b: str
    score: float
    holds: bool = False  # `a` holds this share of `b`'s code and is larger: each is noted, in its own words

    def line(self) -> str:
        """The note on `a`: `b`'s name on one line, as text a terminal or a UTF-8 file takes (it may not be UTF-8)."""
        if self.holds:
            return f"holds {self.score:.2f} of the code of {shown_name(self.b)} (for review; no points taken)"
        return f"similar to {shown_name(self.b)}: {self.score:.2f} of its code in common (for review; no points taken)"

    def other_line(self) -> str:
        """The note on `b`, a submission too."""
        if self.holds:
            return (
                f"{self.score:.2f} of its code is in {shown_name(self.a)}, a larger file (for review; no points taken)"
            )
        return Flag(self.b, self.a, self.score).line()


def tokens(source: str) -> list[str]:
    """The normalized token sequence of Python source (up to where it stops tokenizing)."""
    out: list[str] = []
    previous, joined, found = tokenize.NEWLINE, False, []
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            found.append(token)
    except (tokenize.TokenError, SyntaxError, ValueError):  # (Python 3.12's tokenizer: UnicodeDecodeError too)
        pass  # the tokens before the fault
    for k, t in enumerate(found):
        if t.type in _SKIP or t.type == tokenize.ENDMARKER or t.string == ";":
            previous = tokenize.NEWLINE if t.string == ";" else previous  # `a; b` is two statements, as two lines
            previous = t.type if t.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) else previous
            continue
        if previous in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) and _bare(t, found[k + 1 :]):
            continue  # a statement that does nothing: `pass`, a docstring, a lone constant
        if t.type == tokenize.ERRORTOKEN and (t.string.isspace() or unicodedata.category(t.string[0])[0] == "M"):
            joined = not t.string.isspace()  # m̃_ij: the tokenizer splits a name at its combining mark
            continue
        if t.type == tokenize.NAME and joined and out and out[-1] == "v":
            joined = False
            continue
        previous, joined = t.type, False
        if t.type == tokenize.NAME:
            out.append(t.string if keyword.iskeyword(t.string) or (out and out[-1] == ".") else "v")
        elif t.type == tokenize.NUMBER:
            out.append("0")
        elif t.type in _STRINGS:
            out.append("s")
        else:
            out.append(t.string)
    return out


def _bare(t: tokenize.TokenInfo, after: list[tokenize.TokenInfo]) -> bool:
    """Whether `t`, the first token of a statement, is the whole of one that does nothing: `pass`, a string (a
    docstring too), a number, None, True, False or `...` standing alone."""
    if t.type == tokenize.NAME and t.string == "pass":
        return True
    if not (t.type in (tokenize.NUMBER, tokenize.STRING) or t.string in ("None", "True", "False", "...")):
        return False
    following = next((a for a in after if a.type not in (tokenize.COMMENT, tokenize.NL)), None)
    return following is None or following.type in (tokenize.NEWLINE, tokenize.ENDMARKER) or following.string == ";"


def runs(source: str) -> set[int]:
    """The hashed K-token runs of `source`, normalized."""
    seq = tokens(normal_form.normalized(source))
    return {zlib.crc32(" ".join(seq[i : i + K]).encode()) for i in range(len(seq) - K + 1)}


def fingerprint(source: str, skeleton: frozenset[int] = frozenset()) -> frozenset[int]:
    """The hashed K-token runs of `source`, less those of `skeleton` (the handout's own)."""
    return frozenset(runs(source) - skeleton)


def score(a: frozenset[int], b: frozenset[int]) -> float:
    """Two submissions: the runs they share over the larger's runs, so that a file pasting a classmate's code into its
    own does not make the classmate's close to it (0 where either is too small to judge)."""
    if min(len(a), len(b)) < MIN_RUNS:
        return 0.0
    return len(a & b) / max(len(a), len(b))


def contained(a: frozenset[int], b: frozenset[int]) -> float:
    """The share of the smaller fingerprint found in the other (0 where either is too small to judge)."""
    if min(len(a), len(b)) < MIN_RUNS:
        return 0.0
    return len(a & b) / min(len(a), len(b))


def references(master: Path, grading: dict) -> dict[str, str]:
    """What no submission should be close to: the instructor's master, and the library's listing of its algorithm."""
    found = {f"the instructor's master {master.name}": master.read_text(encoding="utf-8")}
    if grading.get("driver") == "chip":
        name = grading["algorithm"] + ("_backward" if grading.get("pass") == "backward" else "")
        listing = ALGORITHMS / f"{name}.py"
        if listing.is_file():
            found[f"the library's listing sim/algorithms/{listing.name}"] = listing.read_text(encoding="utf-8")
    return found


def report(
    master: Path, grading: dict, handout: str, submissions: list[Path], prints: dict | None = None
) -> list[Flag]:
    """Every submission close to a reference, and every pair of submissions close to each other, best first
    (`prints`: each submission's fingerprint by name, where the caller has them)."""
    skeleton = fingerprint(handout)
    prints = prints if prints is not None else {p.name: fingerprint(_read(p), skeleton) for p in submissions}
    refs = {name: fingerprint(text, skeleton) for name, text in references(master, grading).items()}
    flags = [Flag(a, b, contained(fa, fb)) for a, fa in prints.items() for b, fb in refs.items()]
    for a, b in combinations(prints, 2):
        large, small = (a, b) if len(prints[a]) >= len(prints[b]) else (b, a)
        both = score(prints[a], prints[b])
        flags.append(
            Flag(a, b, both) if both >= THRESHOLD else Flag(large, small, contained(prints[a], prints[b]), True)
        )
    return sorted((f for f in flags if f.score >= THRESHOLD), key=lambda f: -f.score)


def builds_code(source: str) -> list[str]:
    """Where `source` may run code it builds: each use of exec, eval, compile or __import__ (by name, as
    `builtins.exec`, or as the string "exec" anywhere: `getattr(…, "exec")`, `__builtins__["exec"]`) but a call on
    literals only, and each reach into the interpreter's own tables (`__builtins__`, `import builtins`, `vars()`,
    `globals()`, `locals()`, `.__dict__`, `.__globals__`, `.__subclasses__`, getattr of a name built at run time:
    red team 86's `__builtins__["exec"](zlib.decompress(…))`), as "exec, line 3"."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return []
    plain = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call) and not n.keywords
             and all(isinstance(a, ast.Constant) for a in n.args)}  # fmt: skip
    found = []
    for n in ast.walk(tree):
        name = _reach(n)
        if name is not None and not (name in RUNS_CODE and id(n) in plain):
            found.append(f"{name}, line {n.lineno}")
    return sorted(set(found), key=lambda f: int(f.rsplit(" ", 1)[1]))


def _reach(n: ast.AST) -> str | None:
    """What `n` reaches of `builds_code`'s list, or None."""
    if isinstance(n, ast.Name) and (n.id in RUNS_CODE or n.id in TABLES):
        return n.id
    if isinstance(n, ast.Attribute) and (
        n.attr in TABLES or n.attr == "exec" or (n.attr in RUNS_CODE and _builtins(n.value))
    ):
        return n.attr  # (re.compile, torch.compile, model.eval: another module's; no module but builtins has .exec)
    if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in RUNS_CODE:
        return repr(n.value)
    if isinstance(n, ast.Import | ast.ImportFrom):
        modules = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module or ""]
        found = [m for m in modules if m.split(".")[0] in LOADERS]
        return f"import {found[0]}" if found else None
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr" and len(n.args) > 1:
        return None if isinstance(n.args[1], ast.Constant) else "getattr of a name built at run time"
    return None


def _builtins(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and "builtins" in node.id


def notes(read: dict[str, "code_reading.Read"], prints: dict[str, frozenset[int]]) -> dict[str, list[str]]:
    """The submissions the comparison cannot speak for, each with its lines: read too slowly, too little code of its
    own (a compressed copy run by exec, or an untouched handout), code that runs what it builds at run time."""
    out = {}
    for name, r in read.items():
        unread = f"similarity not judged: its code {r.unread}"
        lines = [unread] if r.unread else [NOT_JUDGED] if len(prints[name]) < MIN_RUNS else []
        lines += [f"for review: may run code built at run time ({'; '.join(r.builds[:3])})"] if r.builds else []
        if lines:
            out[name] = lines
    return out


def annotate(assignment, submissions: list[Path], reports) -> None:
    """Add each flag to the notes of the submissions it names, and `notes`' lines to theirs (the grader's hook;
    scores are left alone). Where the report cannot be made, each submission gets one note saying why instead:
    a fault here costs the flags, never the batch's grades."""
    from sim.grading.export import student_text

    by_name = {r.submission: r for r in reports}
    added: dict[str, list[str]] = {name: [] for name in by_name}
    try:
        handout = student_text(assignment.path.read_text(encoding="utf-8"), assignment.path.name)
        skeleton = fingerprint(handout)
        read = code_reading.read_all({p.name: raw(p) for p in submissions})  # each file decoded and read by a child
        prints = {name: r.runs - skeleton for name, r in read.items()}
        flags = report(assignment.path, assignment.grading, handout, submissions, prints)
        for name, lines in notes(read, prints).items():  # "not judged" only where points are at stake
            added[name] += [n for n in lines if n != NOT_JUDGED or by_name[name].score > 0]
        for f in flags:
            added[f.a].append(f.line())
            if f.b in by_name:
                added[f.b].append(f.other_line())
    except Exception as e:  # whatever failed, the grades stand
        why = printable(one_line(f"{type(e).__name__}: {str(e)[:200]}"))
        added = {name: [f"similarity not judged: the similarity report could not be made ({why})"] for name in by_name}
    for name, lines in added.items():
        by_name[name].notes.extend(lines)


def _read(path: Path) -> str:
    """A submission's source as Python reads it (`source_text` of `raw`)."""
    return source_text(raw(path))


def raw(path: Path) -> bytes:
    """A submission's bytes; b"" for a file `submission_file.read` refuses (a link, a pipe, a device, one over the
    cap: graded 0, its reason)."""
    try:
        return submission_file.read(path)
    except submission_file.Refused:
        return b""


def source_text(data: bytes) -> str:
    """Source bytes decoded as Python reads them: in the encoding its coding line (or BOM) names, UTF-8 otherwise.
    Run by `code_reading`'s child, under its deadline: a codec may be slow (punycode is quadratic: 1 MiB took 479 s
    in the grader's own process, red team 88)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding, errors="replace")
    except (SyntaxError, LookupError, UnicodeError):  # no such codec, or not in it: Python would not run it
        return data.decode("utf-8", errors="replace")
