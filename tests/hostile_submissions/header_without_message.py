"""Sends a 'raised' frame with no message, which once crashed the grader."""

import json
import os
import struct
import sys


def forward(chip, *, Br, Bc, scale):
    head = json.dumps({"op": "raised", "type": "ValueError"}).encode()
    os.write(int(sys.argv[-1]), struct.pack(">II", len(head), 0) + head)
    os.read(int(sys.argv[-2]), 1)
