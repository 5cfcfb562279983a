"""Write a file whole or not at all: a temporary file beside it, flushed, then renamed over it."""

import os
import tempfile
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` (UTF-8) in one rename: a reader sees the old file or the new, never half."""
    path = Path(path)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise
