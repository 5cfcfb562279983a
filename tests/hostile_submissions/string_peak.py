"""Sends a 'done' whose memory peak is a string, which once reached the grader's scoring."""

import json
import os
import struct
import sys


def forward(chip, *, Br, Bc, scale):
    head = json.dumps({"op": "done", "peak": "0 bytes"}).encode()
    os.write(int(sys.argv[-1]), struct.pack(">II", len(head), 0) + head)
    os.read(int(sys.argv[-2]), 1)
