"""The README's commands, run as written (issue 24 item 3): every line of every ```bash block but
the set-up lines (the two install commands, which CI runs itself, and the shell's ``activate``),
in order, in a working copy (``tests/integration/test_tutorial.py``'s), each exiting 0. Lines
the tutorial runs word for word are run there and not twice.

The two whole-space sweeps and the plot of the second (``WHOLE_SPACE``: 33 s, 63 s and 20 s on
2 cores) run only with ``SIMCLUSTER_README_FULL=1``: with them the suite would pass 9 minutes
here. The tutorial runs the same sweeps on a restricted search. Slow (about 30 s), run in CI."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.integration.test_tutorial import TUTORIAL, _run, _workdir, bash_blocks

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SETUP = ("python3 -m venv .venv", ". .venv/bin/activate")
WHOLE_SPACE = ("simcluster sweep scenarios/gpt3-175b-1024xa100.yaml --top 10 -j 2",
               "simcluster sweep scenarios/plan-10b-300b.yaml -j 2",
               "python analysis/plot_planning.py")


def _command(line: str) -> str:
    """The line without its trailing ``# comment``."""
    return re.sub(r"\s+#.*$", "", line).strip()


def readme_lines() -> list[str]:
    lines = [_command(line) for block in bash_blocks(README.read_text()) for line in block
             if not line.startswith("#")]
    return [line for line in lines if line and not line.startswith(SETUP)]


def test_the_setup_lines_are_the_readmes_two_commands() -> None:
    first = [_command(line) for line in bash_blocks(README.read_text())[0]
             if not line.startswith("#")]
    assert first[0].endswith(".venv/bin/simcluster run scenarios/default.yaml")
    assert first[1].endswith(".venv/bin/python -m pytest")


@pytest.mark.slow
def test_readme_runs_as_written(tmp_path: Path) -> None:
    tutorial = {_command(line) for block in bash_blocks(TUTORIAL.read_text()) for line in block}
    lines = readme_lines()
    assert len(lines) >= 15
    assert all(any(line.startswith(w) for line in lines) for w in WHOLE_SPACE)
    full = os.environ.get("SIMCLUSTER_README_FULL") == "1"
    work = _workdir(tmp_path)
    for line in lines:
        if line not in tutorial and (full or not line.startswith(WHOLE_SPACE)):
            _run(line, work)
