"""Announces a 250 MiB message, which once grew the grader to 800 MiB."""

import json
import os
import struct
import sys


def forward(chip, *, Br, Bc, scale):
    head = json.dumps({"op": "done", "peak": 0, "arrays": [["float64", [250 << 17]]]}).encode()
    os.write(int(sys.argv[-1]), struct.pack(">II", len(head), 250 << 20) + head)
    chunk = b"\0" * (1 << 20)
    for _ in range(250):
        os.write(int(sys.argv[-1]), chunk)
