"""The errors flashsim raises on bad input: one line each, naming the argument and what is allowed."""


class FlashsimError(ValueError):
    """Base of every error flashsim reports to a user (the CLI prints it on one line, exit code 2)."""


class InputError(FlashsimError):
    """An argument is outside what flashsim allows; the message names it and the allowed range."""


class SRAMOverflowError(FlashsimError):
    """An algorithm asked for more on-chip SRAM than the part has; the message lists the resident buffers."""
