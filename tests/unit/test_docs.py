"""Generated documentation is current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simcluster.report.reference import reference_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_scenario_reference_is_current() -> None:
    # Regenerate with: python -m simcluster.report.reference > docs/scenarios.md
    assert (ROOT / "docs" / "scenarios.md").read_text() == reference_markdown()


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _relative_links(page: Path) -> list[str]:
    """Markdown link targets of ``page`` that are not URLs or in-page anchors."""
    targets = [m.group(1) for m in LINK.finditer(page.read_text("utf-8"))]
    return [t for t in targets if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve_inside_the_repository(page: Path) -> None:
    root = ROOT.resolve()
    for target in _relative_links(page):
        path = (page.parent / target.split("#")[0]).resolve()
        assert path.is_relative_to(root), f"{page.name}: {target} points outside the repository"
        assert path.exists(), f"{page.name}: {target} does not exist"


#: A ``../`` path in running text or a code span: ``../x``, ``../../x/y``.
ESCAPE = re.compile(r"(?:\.\./)+[\w.-]+(?:/[\w.-]+)*")


def _escapes(page: Path) -> list[str]:
    """The ``../`` paths of ``page``'s text that resolve outside the repository or to nothing
    in it (a folder beside the checkout, named from a page one level down)."""
    root = ROOT.resolve()
    paths = {e: (page.parent / e).resolve() for e in ESCAPE.findall(page.read_text("utf-8"))}
    return [e for e, path in paths.items() if not (path.is_relative_to(root) and path.exists())]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_paths_outside_the_repository(page: Path) -> None:
    """No absolute work-area paths or ``../`` escapes in the text either (code spans included)."""
    assert "/work/" not in page.read_text("utf-8"), page.name
    assert _escapes(page) == [], page.name


def test_the_link_check_catches_an_escape(tmp_path: Path) -> None:
    page = tmp_path / "x.md"
    page.write_text("see [design](../outside/DESIGN.md) and [web](https://example.com) [a](#b)")
    assert _relative_links(page) == ["../outside/DESIGN.md"]
    assert _escapes(page) == ["../outside/DESIGN.md"]
