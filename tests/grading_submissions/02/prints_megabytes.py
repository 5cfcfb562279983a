"""Prints 8 MiB."""


def forward(chip, *, Br, Bc, scale):
    for _ in range(8 * 1024):
        print("x" * 1023)
