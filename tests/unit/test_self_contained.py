"""The repository is self-contained: no file names a path outside the checkout (issue 24 item 2).

Every tracked text file is scanned for absolute work-area paths and for the folders beside the
checkout that the project was built from (its calibration, reference notes and seed documents):
a clone must be able to check every claim from its own files and the public sources cited.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Built from parts so that this file does not match itself.
OUTSIDE = re.compile("|".join([r"/" + "work/", r"\.\./" + "shared", "shared/" + "calibration",
                               "shared/" + "reference", "shared/" + "seeds"]))
#: The guards that spell the same patterns to check pages (test_docs, test_nvidia_models).
GUARDS = {"tests/unit/test_docs.py", "tests/unit/test_nvidia_models.py"}
TEXT = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".csv", ".json", ".cfg", ".ini", ".sh",
        ".html", ".svg", ""}


def _tracked() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    return [ROOT / line for line in out.splitlines()
            if Path(line).suffix in TEXT and line not in GUARDS]


def _hits(path: Path) -> list[str]:
    try:
        text = path.read_text("utf-8")
    except (UnicodeDecodeError, FileNotFoundError):
        return []
    return [f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
            for n, line in enumerate(text.splitlines(), 1) if OUTSIDE.search(line)]


def test_no_file_names_a_path_outside_the_repository() -> None:
    files = _tracked()
    assert len(files) > 100
    hits = [h for f in files for h in _hits(f)]
    assert hits == []


def test_the_scan_catches_an_outside_path(tmp_path: Path) -> None:
    page = tmp_path / "x.yaml"
    page.write_text("a: 1  # see " + "/wo" + "rk/" + "shared/" + "seeds/x.txt\nb: 2\n")
    assert OUTSIDE.search(page.read_text())
    assert not OUTSIDE.search("# docs/seeds.md, section 1")
