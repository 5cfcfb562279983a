"""Sends a 60 KB header of nested lists, which once raised RecursionError in the grader."""

import os
import struct
import sys


def forward(chip, *, Br, Bc, scale):
    head = b'{"op": "done", "peak": ' + b"[" * 30000 + b"]" * 30000 + b"}"
    os.write(int(sys.argv[-1]), struct.pack(">II", len(head), 0) + head)
    os.read(int(sys.argv[-2]), 1)
