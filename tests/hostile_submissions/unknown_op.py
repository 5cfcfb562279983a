"""Sends a frame whose op the grader does not know, asking it to do something else."""

import json
import os
import struct
import sys


def forward(chip, *, Br, Bc, scale):
    head = json.dumps({"op": "write_csv", "path": "/tmp/x"}).encode()
    os.write(int(sys.argv[-1]), struct.pack(">II", len(head), 0) + head)
    os.read(int(sys.argv[-2]), 1)
