"""Placeholder, replaced once the recording exists."""


def table(record: dict) -> list[str]:
    return [str(r) for r in record.get("profiled", [])]
