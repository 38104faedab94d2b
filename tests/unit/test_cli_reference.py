"""docs/cli.md is the parser's own reference (simcluster/cli_reference.py): it must match the parser
of this commit, and every argument of every subcommand must say what it does."""

from __future__ import annotations

import argparse
from pathlib import Path

from simcluster.cli import build_parser
from simcluster.cli_reference import _subcommands, argument_rows, arguments, reference

ROOT = Path(__file__).resolve().parents[2]


def test_docs_cli_md_is_generated_from_this_parser() -> None:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == reference(), (
        "docs/cli.md is stale: python -m simcluster.cli_reference > docs/cli.md")


def _parsers() -> list[tuple[str, argparse.ArgumentParser]]:
    parser = build_parser()
    return [("simcluster", parser), *((path, p) for path, _, p in _subcommands(parser, "simcluster"))]


def test_every_argument_has_help_and_a_row() -> None:
    for path, parser in _parsers():
        actions = arguments(parser)
        assert len(argument_rows(parser)) == len(actions), path
        for action in actions:
            assert action.help, f"{path} {action.option_strings or action.dest}: no help text"


def test_a_typed_argument_states_what_it_accepts() -> None:
    """The value column quotes the type's own refusal: the sweep's --replicas takes a whole number
    >= 1 and defaults to 100, reliability's to 200 (their own help texts say so)."""
    page = reference()
    sweep = page.split("\n## sweep\n", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in sweep.splitlines() if line.startswith("| `--replicas`"))
    assert "REPLICAS: a whole number >= 1" in row
    assert "`100`" in row


def test_every_subcommand_has_a_section() -> None:
    page = reference()
    for path, _ in _parsers()[1:]:
        assert f"`{path}`:" in page, path
