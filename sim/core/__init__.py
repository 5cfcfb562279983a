"""The leaf of sim: errors, dtypes, formatting, strict JSON and atomic files (anyone may import it)."""
