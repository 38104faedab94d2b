"""The repository is self-contained: no file names a path outside the checkout (issue 24 item 2).

Every tracked text file is scanned for absolute work-area paths and for the folders beside the
checkout that the project was built from (its calibration, reference notes and seed documents),
and for references to files that are not in the repository: the notes the project was built from
(cited by name) and repository paths (``docs/<name>.md``, ``scenarios/<name>.yaml``, ...) that do
not exist.
A clone must be able to check every claim from its own files and the public sources cited.
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


#: Notes the project was built from, which were never part of the repository; each is cited by its
#: public sources instead. Built from parts so that this file does not match itself.
NOTES = re.compile("|".join([r"reference/" + r"(?:failures|network)\.md",
                             r"\b(?:failures|network)" + r"\.md\b",
                             "NEW_SPEC_" + "FIELDS",
                             r"calibration/" + r"README\.md",
                             r"\bpublished" + r"\.yaml\b",
                             r"\b(?:DESIGN|STYLE)" + r"\.md\b"]), re.IGNORECASE)
#: A repository-relative path of the kinds the project cites (not part of a longer path or URL).
REPO_PATH = re.compile(r"(?<![\w./@-])((?:docs|scenarios|topologies|analysis)/[\w./*<>{}\[\]-]+?"
                       r"\.(?:md|yaml|py))(?![\w/-])")
#: Wildcards and placeholders: ``scenarios/*.yaml``, ``topologies/{name}.yaml``, ``docs/NAME.md``.
PLACEHOLDER = re.compile(r"[*<>{}\[\]]|(?:^|/)(?:NAME|X+|\.\.\.)\.")
#: Files of upstream repositories cited next to their repository (same spelling as ours, not ours):
#: pytorch/torchtitan, NVIDIA/Megatron-LM, NVIDIA-NeMo/Megatron-Bridge and NVIDIA/NeMo.
UPSTREAM = {"docs/performance.md", "docs/fsdp.md", "docs/distrib_optimizer.md",
            "docs/performance-summary.md", "docs/performance-summary-archive.md",
            "docs/source/performance/performance_summary.md",
            "docs/source/performance/performance_long_sequence.md"}


def _dead_references(path: Path, root: Path = ROOT) -> list[str]:
    """Lines of ``path`` that cite a note outside the repository or a repository path that is
    missing (resolved against ``root``)."""
    try:
        text = path.read_text("utf-8")
    except (UnicodeDecodeError, FileNotFoundError):
        return []
    hits = []
    for n, line in enumerate(text.splitlines(), 1):
        dead = [m.group(0) for m in NOTES.finditer(line)]
        dead += [ref for ref in REPO_PATH.findall(line)
                 if not PLACEHOLDER.search(ref) and ref not in UPSTREAM and not (root / ref).exists()]
        hits += [f"{path.relative_to(root)}:{n}: {ref}" for ref in dead]
    return hits


def test_no_file_references_a_file_missing_from_the_repository() -> None:
    files = _tracked()
    assert len(files) > 100
    hits = [h for f in files for h in _dead_references(f)]
    assert hits == []


def test_the_scan_catches_a_dead_reference(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# here\n")  # a reference to it is alive
    page = tmp_path / "x.py"
    note = "net" + "work.md"
    page.write_text(f"# see reference/{note} section 3.1 and {note} s7.2\n"
                    "# fitted to calibration/" + "published" + ".yaml\n"
                    "# keys of NEW_SPEC_" + "FIELDS_DES.md\n"
                    "# docs/" + "here.md exists, docs/" + "gone.md does not; scenarios/*.yaml is a pattern\n"
                    "# pytorch/torchtitan docs/performance.md is upstream; docs/NAME.md a placeholder\n")
    hits = _dead_references(page, root=tmp_path)
    assert [h.split(": ", 1)[1] for h in hits] == [
        f"reference/{note}", note, "published" + ".yaml", "NEW_SPEC_" + "FIELDS", "docs/" + "gone.md"]
    assert [h.split(":")[1] for h in hits] == ["1", "1", "2", "3", "4"]
