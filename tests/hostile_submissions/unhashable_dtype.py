"""Sends an array spec whose dtype is a list (unhashable), which once raised TypeError in the grader."""

import json
import os
import struct
import sys


def forward(chip, *, Br, Bc, scale):
    head = json.dumps({"op": "done", "peak": 0, "arrays": [[["float32"], [1]]]}).encode()
    os.write(int(sys.argv[-1]), struct.pack(">II", len(head), 4) + head + b"\0" * 4)
    os.read(int(sys.argv[-2]), 1)
