"""Argument types shared by the command-line modules (argparse ``type=`` callables)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type accepting integers in ``[minimum, maximum]`` with a clear message otherwise."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"at most {maximum}, got {text!r}")
        return value

    return parse


positive_int = whole_number(1)
non_negative_int = whole_number(0)

#: Worker processes of one command: more than any machine's useful core count (each is a process).
MAX_JOBS = 256
job_count = whole_number(1, MAX_JOBS)


def add_scenario(parser: argparse.ArgumentParser, scenario_help: str, set_example: str) -> None:
    """The positional scenario file and the repeatable ``--set KEY=VALUE`` of a subcommand."""
    parser.add_argument("scenario", help=scenario_help)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override a scenario key by its dotted path, e.g. {set_example}")
