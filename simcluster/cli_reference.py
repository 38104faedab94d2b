"""docs/cli.md: every subcommand's arguments, generated from the parser itself.

``python -m simcluster.cli_reference > docs/cli.md`` writes it; a test checks that the page in the
repository is what the parser says now, so the reference cannot drift from ``--help``. The page is
built from the parser's actions (option strings, metavar, default, choices, type and help), not
from argparse's formatted help, whose line wrapping changes with the terminal and Python version.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from simcluster.cli import build_parser

HEADER = (
    "# Command-line reference\n\n"
    "Generated from the parser by `python -m simcluster.cli_reference > docs/cli.md` (a test checks"
    " that this page matches it). `simcluster COMMAND --help` prints the same per command; the"
    " tutorial (docs/tutorial.md) shows them in use.\n"
)


def _subcommands(parser: argparse.ArgumentParser, prefix: str) -> Iterator[
        tuple[str, str, argparse.ArgumentParser]]:
    """``(command path, one-line help, parser)`` of ``parser`` and of its subcommands, depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, child in action.choices.items():
                path = f"{prefix} {name}"
                yield path, helps.get(name, ""), child
                yield from _subcommands(child, path)


def _cell(text: object) -> str:
    """A value as one Markdown table cell (pipes escaped, no line breaks)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _value(action: argparse.Action) -> str:
    """What an argument takes: its metavar, its choices, its type's name, or nothing (a flag)."""
    if action.nargs == 0:
        return ""
    if action.choices is not None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    accepts = _accepts(action)
    return f"{metavar}: {accepts}" if accepts else metavar


def _accepts(action: argparse.Action) -> str:
    """What an argument's type accepts, in its own words: the message it refuses ``?`` with
    (``expected a whole number >= 1, got '?'`` -> ``a whole number >= 1``); empty for free text."""
    if not callable(action.type):
        return ""
    try:
        action.type("?")
    except argparse.ArgumentTypeError as err:
        return str(err).split(", got", 1)[0].removeprefix("expected ")
    return ""


def _default(action: argparse.Action) -> str:
    if action.default in (None, argparse.SUPPRESS, False, []) or action.nargs == 0:
        return ""
    return f"`{action.default}`"


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The arguments of ``parser`` the page lists: not its subcommands, not ``--help``."""
    return [a for a in parser._actions
            if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)]


def argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    """One table row per argument of ``parser`` (:func:`arguments`)."""
    rows = []
    for action in arguments(parser):
        name = ", ".join(action.option_strings) or action.dest
        required = " (required)" if action.required and action.option_strings else ""
        rows.append(f"| `{_cell(name)}`{required} | {_cell(_value(action))} | {_cell(_default(action))}"
                    f" | {_cell(_help(parser, action))} |")
    return rows


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The help text as ``--help`` prints it (``%(default)s`` filled in, ``%%`` as ``%``)."""
    if not action.help:
        return ""
    return parser._get_formatter()._expand_help(action)


def reference() -> str:
    """The whole page."""
    parser = build_parser()
    parts = [HEADER, f"## simcluster\n\n{parser.description}\n"]
    parts.append(_table(argument_rows(parser)))
    for path, summary, child in _subcommands(parser, "simcluster"):
        parts.append(f"## {path.removeprefix('simcluster ')}\n\n`{path}`: {summary}\n")
        parts.append(_table(argument_rows(child)))
    return "\n".join(parts)


def _table(rows: list[str]) -> str:
    if not rows:
        return "No arguments.\n"
    return "\n".join(["| argument | value | default | what it does |", "|---|---|---|---|", *rows]) + "\n"


if __name__ == "__main__":
    print(reference(), end="")
