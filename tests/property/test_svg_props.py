"""report.svg draws inside its own canvas and labels points in the data's units, linear or log."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from simcluster.report import svg

positive = st.floats(1e-3, 1e6, allow_nan=False)
points = st.lists(st.tuples(positive, positive), min_size=1, max_size=12, unique=True)


def _inside(page: str) -> None:
    root = ET.fromstring(page)
    width, height = float(root.get("width", "0")), float(root.get("height", "0"))
    for element in root.iter():
        for x_key, y_key in (("x", "y"), ("cx", "cy")):
            if element.get(x_key) is not None:
                x, y = float(element.get(x_key, "")), float(element.get(y_key, ""))
                assert 0.0 <= x <= width, (element.tag, x)
                assert 0.0 <= y <= height, (element.tag, y)


@given(points, st.booleans())
def test_scatter_draws_inside_its_canvas_and_titles_the_front_in_data_units(
        data: list[tuple[float, float]], log: bool) -> None:
    front = data[:3]
    page = svg.scatter(data, front, ("days", "usd"), "p", log=log)
    _inside(page)
    titles = {(float(x), float(y))
              for x, y in re.findall(r"<title>days ([^,]+), usd ([^<]+)</title>", page)}
    assert titles == {(float(f"{x:.4g}"), float(f"{y:.4g}")) for x, y in front}
    axis = "usd (log)" if log else "usd"
    assert re.search(rf'transform="rotate\(-90 14 158\)">{re.escape(axis)}</text>', page)
    x_ticks = re.findall(r'<text x="[^"]+" y="316.0" font-size="10" text-anchor="([a-z]+)">([^<]+)<', page)
    y_ticks = re.findall(r'<text x="66.0" y="[^"]+" font-size="10" text-anchor="([a-z]+)">([^<]+)<', page)
    assert x_ticks
    assert y_ticks
    for anchor, label in x_ticks:
        assert anchor == "middle"
        float(label)  # a tick is labelled with a number (in the data's units)
    for anchor, label in y_ticks:
        assert anchor == "end"
        float(label)


def test_scatter_without_points_says_so() -> None:
    """No point, or (log axes) none with both coordinates > 0: a one-line figure that says so."""
    for page in (svg.scatter([], [], ("days", "usd"), "p"),
                 svg.scatter([(0.0, 1.0), (2.0, -1.0)], [], ("days", "usd"), "p", log=True)):
        assert ">no points</text>" in page
        assert 'aria-label="p"' in page


@given(st.dictionaries(st.tuples(st.integers(1, 8), st.integers(1, 8)), positive, min_size=1,
                       max_size=16))
def test_heatmap_draws_inside_its_canvas_light_text_on_dark_cells(
        cells: dict[tuple[int, int], float]) -> None:
    page = svg.heatmap(cells, ("pp", "tp"), "s", "h")
    _inside(page)
    low, high = min(cells.values()), max(cells.values())
    fills = re.findall(r'fill="(#fff|#000)"[^>]*>([^<]+)</text>', page)
    assert len(fills) == len(cells)
    darkest = [colour for colour, _ in fills]
    if high > low:
        assert darkest.count("#fff") == sum((v - low) / (high - low) < 0.5 for v in cells.values())
