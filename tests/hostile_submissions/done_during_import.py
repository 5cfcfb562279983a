"""Sends a "done" frame on the grader's pipe while it is imported (red team 104: the grader read that frame as an
import's failure and raised KeyError: 'message', costing this submission "the grader failed on it")."""

import json
import os
import struct
import sys

_header = json.dumps({"op": "done", "arrays": []}).encode()
os.write(int(sys.argv[3]), struct.pack(">II", len(_header), 0) + _header)


def forward(chip, **kw):
    pass
