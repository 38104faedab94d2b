"""The project's error types.

Bad input raises :class:`SpecError` (CLI exit status 2): it names the file, the key path inside the
file, the offending value and what was expected. Anything else that escapes is an internal error
(exit status 1).
"""

from __future__ import annotations

from collections.abc import Collection


class SimclusterError(Exception):
    """Base class of every error the package raises on purpose."""


class SpecError(SimclusterError):
    """Invalid user input: a scenario, topology, catalog entry or command-line value.

    Parameters
    ----------
    key : str
        Dotted key path inside the document (``parallelism.tp``); empty for the whole document.
    message : str
        What is wrong and what was expected, e.g. ``"3 does not divide heads=96"``.
    source : str
        The file (or ``--set``/``<inline>``) the value came from.
    """

    def __init__(self, key: str, message: str, source: str = "") -> None:
        self.key = key
        self.message = message
        self.source = source
        super().__init__(self.render())

    def __reduce__(self) -> tuple[type[SpecError], tuple[str, str, str]]:
        """Pickle by the three fields, so a worker process's error arrives intact."""
        return SpecError, (self.key, self.message, self.source)

    def render(self) -> str:
        """One line: ``file: key.path: message``."""
        parts = [p for p in (self.source, self.key) if p]
        return ": ".join([*parts, self.message]).replace("\n", "\\n")

    def within(self, source: str, prefix: str = "") -> SpecError:
        """The same error re-anchored in ``source`` with ``prefix`` prepended to its key path."""
        key = ".".join(p for p in (prefix, self.key) if p)
        return SpecError(key, self.message, self.source or source)


def check_choice(key: str, value: object, choices: Collection[str], source: str = "") -> str:
    """``value`` when it is one of ``choices``; else a :class:`SpecError` at ``key`` listing them.

    The one choice check of the engines, loops and sweep options (``'x' is not one of a, b``).
    """
    if not isinstance(value, str) or value not in choices:
        raise SpecError(key, f"{value!r} is not one of {', '.join(choices)}", source)
    return value


class InvariantError(SimclusterError):
    """An internal invariant does not hold: a bug, never bad input (the CLI exits with status 1).

    Raised where ``assert`` would be stripped by ``python -O``.
    """
