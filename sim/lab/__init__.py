"""Helpers behind commands and lessons: reports, sweeps, benchmarks, the walkthrough, the exercises."""
