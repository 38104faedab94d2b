"""Generated documentation is current."""

from __future__ import annotations

from pathlib import Path

from simcluster.report.reference import reference_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_scenario_reference_is_current() -> None:
    # Regenerate with: python -m simcluster.report.reference > docs/scenarios.md
    assert (ROOT / "docs" / "scenarios.md").read_text() == reference_markdown()
