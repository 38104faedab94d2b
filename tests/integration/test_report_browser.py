"""``simcluster report`` pages rendered by a real browser: headless Chromium (the distribution's
package; ``.ci/run`` installs it) loads each page from ``file://``, the DOM holds every figure, every
embedded PNG decodes (a copy of the page with a load probe: the page itself has no script), and a
screenshot is a PNG with non-blank content.

Skips, saying so, only where no Chromium binary is found (chromium, chromium-browser,
google-chrome). Slow: a browser start is about 1 to 3 s, four starts per page.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import simcluster
from simcluster.cli import main
from tests.tiny import tiny_scenario

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
BROWSER = next((found for name in BROWSERS if (found := shutil.which(name))), None)
FLAGS = ("--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars")
TIMEOUT_S = 120
#: A load probe for a copy of the page: after the load event, every <img> decoded to a picture.
PROBE = ("<script>window.addEventListener('load', () => { const imgs = [...document.images]; "
         "document.body.setAttribute('data-images-ok', String(imgs.length > 0 && imgs.every("
         "i => i.complete && i.naturalWidth > 0))); });</script>")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(BROWSER is None, reason="no Chromium binary found (looked for "
                       f"{', '.join(BROWSERS)} on PATH); CI installs it with apt-get install "
                       "chromium"),
]

SCENARIO: dict[str, Any] = tiny_scenario(
    "browser <b>check</b>",
    reliability={"failure_rate_per_node_day": 0.5, "restart_s": 300},
    checkpoint={"interval_min": 5, "mode": "sync", "storage_write_GBps": 10})


def _chromium(*args: str) -> str:
    assert BROWSER is not None
    done = subprocess.run([BROWSER, *FLAGS, *args], capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=True)
    return done.stdout


def _non_white_share(png: Path) -> float:
    """Share of pixels that are not (near) white, read with matplotlib's PNG reader."""
    import matplotlib.image as mpimg

    pixels = mpimg.imread(png)
    rgb = pixels[..., :3]
    return float((rgb.min(axis=-1) < 0.94).mean())


def _check_page(page: Path, figures: dict[str, int], tmp_path: Path) -> None:
    dom = _chromium("--dump-dom", page.as_uri())
    for tag, count in figures.items():
        assert len(re.findall(f"<{tag}[ >]", dom)) == count, tag
    assert "<b>" not in dom  # the scenario name stayed text
    probe = tmp_path / f"probe-{page.parent.name}.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                     encoding="utf-8")
    probed = _chromium("--virtual-time-budget=5000", "--dump-dom", probe.as_uri())
    if figures.get("img"):
        assert 'data-images-ok="true"' in probed
    shot = tmp_path / f"shot-{page.parent.name}.png"
    _chromium(f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri())
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert _non_white_share(shot) > 0.03


def test_scenario_page_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    assert main(["report", str(path), "-o", str(tmp_path / "run"), "--replicas", "8"]) == 0
    # the Gantt and goodput PNGs; the breakdown and memory bars and the time-to-train histogram
    # as SVG
    _check_page(tmp_path / "run" / "index.html", {"img": 2, "svg": 3, "pre": 1}, tmp_path)


def test_sweep_page_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(SCENARIO), encoding="utf-8")
    simcluster.sweep(path, search=["tp=1,2", "pp=1,2", "recompute=none", "zero_stage=0,1"],
                     out=tmp_path / "sweep")
    assert main(["report", str(tmp_path / "sweep"), "-o", str(tmp_path / "page")]) == 0
    # the Pareto scatter and the TP x PP heatmap
    _check_page(tmp_path / "page" / "index.html", {"svg": 2, "table": 2}, tmp_path)
