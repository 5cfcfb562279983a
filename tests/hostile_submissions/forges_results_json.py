"""Writes a forged Gradescope results.json (full marks) where the grader would write it."""

import json


def forward(chip, *, Br, Bc, scale):
    with open("/tmp/flashsim-hostile-results.json", "w") as f:
        json.dump({"score": 100, "tests": []}, f)
