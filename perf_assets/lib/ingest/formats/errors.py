"""The one error a parser raises for bad input: the file is quarantined with this reason."""


class QuarantineError(ValueError):
    """Raised with a reason a person can act on (what is wrong, and where in the file)."""
