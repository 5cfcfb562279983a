"""The one JSON encoder of flashsim's output: strict JSON (RFC 8259) that any parser reads.

JSON has no infinities or NaN. A non-finite float is written as the string "Infinity", "-Infinity" or "NaN"
(JavaScript's spellings: a running max m starts at "-Infinity", a query that sees no key has L = "-Infinity"),
and `revive` turns those strings back into floats where numbers are read. NumPy scalars and arrays are written
as the Python numbers and lists they hold.
"""

import json
import math

import numpy as np

NONFINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def dumps(obj, indent: int | None = None) -> str:
    """`obj` as strict JSON text."""
    return json.dumps(plain(obj), indent=indent, allow_nan=False, ensure_ascii=False)


def plain(obj):
    """`obj` with non-finite floats as their strings, tuples as lists and NumPy values as Python's."""
    if isinstance(obj, float | np.floating):
        x = float(obj)
        return x if math.isfinite(x) else ("NaN" if math.isnan(x) else "Infinity" if x > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return plain(obj.tolist())
    if isinstance(obj, np.integer | np.bool_):
        return obj.item()
    return obj


def revive(obj):
    """Numbers read back: the strings "Infinity", "-Infinity" and "NaN" inside lists as floats (recursively)."""
    if isinstance(obj, list):
        return [NONFINITE.get(v, v) if isinstance(v, str) else revive(v) for v in obj]
    if isinstance(obj, dict):
        return {k: NONFINITE.get(v, v) if isinstance(v, str) and k != "text" else revive(v) for k, v in obj.items()}
    return obj
