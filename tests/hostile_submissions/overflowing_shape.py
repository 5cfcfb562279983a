"""Sends an array shape whose product overflows 64 bits, which once raised ValueError in the grader."""

import json
import os
import struct
import sys


def forward(chip, *, Br, Bc, scale):
    head = json.dumps({"op": "done", "peak": 0, "arrays": [["float64", [2**30, 2**30, 2**30, 2**30]]]}).encode()
    os.write(int(sys.argv[-1]), struct.pack(">II", len(head), 8) + head + b"\0" * 8)
    os.read(int(sys.argv[-2]), 1)
