"""Renderers: pure functions from simulator results to rich renderables (the CLI and the lessons print them)."""
