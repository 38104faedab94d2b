"""docs/tutorial.md, run as written: every line of every ```bash block, top to bottom.

The commands run in a temporary directory holding copies of ``scenarios/`` and ``analysis/`` (so
the sweeps' default ``runs/`` and every ``--out`` land there, never in the repository), with the
virtual environment's ``simcluster`` and ``python`` first on PATH. Each must exit 0. The three
install lines are the only lines not run (the test already runs inside the installed package); they
must be the first block's first lines. Then a few numbers the text quotes must appear both in the
text and in the output of the command they belong to, so the text cannot drift from the tool.

Slow (about 20 s: two DES re-ranks and several Monte Carlo runs), still run in CI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = ROOT / "docs" / "tutorial.md"
BIN = Path(sys.executable).parent
INSTALL = ("python3 -m venv .venv", ". .venv/bin/activate", "pip install -e '.[plots]'")
#: Command prefix -> strings the text quotes from its output (each must be in both).
QUOTED: dict[str, tuple[str, ...]] = {
    "simcluster run scenarios/plan-10b-300b.yaml": ("14.49 s", "47.99 days", "308,636", "290,526",
                                                    "30,842"),
    "simcluster sweep scenarios/plan-10b-300b.yaml": ("127.6", "20,501", "84,669", "72,632",
                                                      "64.86", "26,609", "398,000", "5.741",
                                                      "108,379", "31.94", "20,528"),
    "python analysis/plot_planning.py": ("planning.png",),
    "simcluster sweep scenarios/gpt3-175b-1024xa100.yaml --top 10": (
        "tp8 pp8 dp16 mb1 interleaved/4 none sp z1", "19.29", "0.5495", "35.58", "328", "124",
        "467.0 GiB"),
    "simcluster sweep scenarios/gpt3-175b-1024xa100.yaml --top 3": (
        "tp8 pp16 dp8 mb1 zb-h1 none sp z1", "19.77", "25.6"),
    "simcluster run scenarios/gpt3-175b-1024xa100.yaml": ("76.6%", "16.9%", "4.1%", "0.7028", "0.5638"),
    "simcluster reliability scenarios/1k-h100-reliability.yaml --fast --replicas 100": (
        "98.72%", "25.72", "25.39", "7.91", "40.1%", "21.1%", "22.2 min", "22.1 min"),
    "simcluster reliability scenarios/1k-h100-reliability.yaml --fast --replicas 50": ("0.9855",),
    "simcluster sweep scenarios/1k-h100-reliability.yaml --layouts fixed --goodput 6": (
        "0.9933", "0.9877", "0.9868"),
    "simcluster sweep scenarios/1k-h100-reliability.yaml --layouts fixed --goodput 3": (
        "0.9571", "26.54", "0.9882", "25.69", "0.9888"),
}

pytestmark = pytest.mark.slow


def bash_blocks(text: str) -> list[list[str]]:
    """The command lines of each ```bash block, in order (``\\`` continuations joined)."""
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    result = []
    for block in blocks:
        joined = block.replace("\\\n", " ")
        result.append([line.strip() for line in joined.splitlines() if line.strip()])
    return result


def test_bash_blocks_are_extracted_in_order() -> None:
    text = "x\n```bash\na \\\n  b\n\nc\n```\n```text\nnot\n```\n```bash\nd\n```\n"
    assert bash_blocks(text) == [["a    b", "c"], ["d"]]


def test_install_lines_open_the_tutorial() -> None:
    first = bash_blocks(TUTORIAL.read_text())[0]
    assert tuple(first[: len(INSTALL)]) == INSTALL


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "repo"
    work.mkdir()
    for name in ("scenarios", "analysis"):
        shutil.copytree(ROOT / name, work / name, ignore=shutil.ignore_patterns("__pycache__"))
    return work


def _run(line: str, cwd: Path) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "MPLBACKEND": "Agg"}
    done = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{line}\nexit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    return done.stdout + done.stderr


def test_tutorial_runs_as_written(tmp_path: Path) -> None:
    text = TUTORIAL.read_text()
    lines = [line for block in bash_blocks(text) for line in block if line not in INSTALL]
    assert len(lines) >= 10
    work = _workdir(tmp_path)
    outputs = [(line, _run(line, work)) for line in lines]
    for prefix, quoted in QUOTED.items():
        matching = [out for line, out in outputs if line.startswith(prefix)]
        assert len(matching) == 1, f"{prefix!r} matches {len(matching)} commands of the tutorial"
        for number in quoted:
            assert number in text, f"the tutorial no longer quotes {number!r} ({prefix})"
            assert number in matching[0], f"{prefix} no longer prints {number!r}:\n{matching[0]}"
    assert (work / "runs" / "sweep" / "plan-10b-300b" / "planning.png").stat().st_size > 10_000
    assert (work / "runs" / "sweep" / "ckpt-modes" / "results.csv").is_file()  # --results csv
    assert not (work / "runs" / "sweep" / "plan-10b-300b" / "results.csv").exists()  # Parquet alone
