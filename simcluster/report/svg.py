"""Small inline-SVG figures of the HTML report: stacked bar, scatter with a front, heatmap,
histogram.

Each function returns one ``<svg>`` element as text, every label escaped, sized in CSS pixels, so
the page stays a single file that renders without matplotlib, JavaScript or the network. The
matplotlib figures (the pipeline Gantt, goodput against the checkpoint interval) are embedded as
PNG by :mod:`simcluster.report.html`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

#: One colour per category, in order (the matplotlib "deep" palette of report/gantt.py).
PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3",
           "#8C8C8C", "#CCB974", "#64B5CD")
WIDTH = 720


def _text(x: float, y: float, label: str, anchor: str = "start", size: int = 12) -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}">'
            f"{escape(label)}</text>")


def _rect(x: float, y: float, w: float, h: float, fill: str, tip: str) -> str:
    return (f'<rect x="{x:.2f}" y="{y:.2f}" width="{max(w, 0.0):.2f}" height="{h:.2f}" '
            f'fill="{fill}"><title>{escape(tip)}</title></rect>')


def _svg(height: float, body: Sequence[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="figure" role="img" '
            f'aria-label="{escape(label)}" width="{WIDTH}" height="{height:.0f}" '
            f'viewBox="0 0 {WIDTH} {height:.0f}">' + "".join(body) + "</svg>")


def stacked_bar(parts: Mapping[str, float], unit: str, label: str) -> str:
    """One horizontal bar split into ``parts`` (non-negative values in ``unit``), with a legend.

    Zero parts are left out of the bar and the legend.
    """
    shown = {k: v for k, v in parts.items() if v > 0}
    total = sum(shown.values())
    body: list[str] = []
    x = 10.0
    span = WIDTH - 20.0
    for i, (name, value) in enumerate(shown.items()):
        w = span * value / total if total > 0 else 0.0
        colour = PALETTE[i % len(PALETTE)]
        body.append(_rect(x, 10, w, 36, colour, f"{name}: {value:.4g} {unit}"))
        x += w
        lx, ly = 10 + (i % 2) * 354, 70 + (i // 2) * 20
        body.append(_rect(lx, ly - 10, 12, 12, colour, name))
        share = f"{value / total:.1%}" if total > 0 else "-"
        body.append(_text(lx + 18, ly, f"{name} {value:.4g} {unit} ({share})"))
    height = 80 + ((len(shown) + 1) // 2) * 20
    return _svg(height, body, label)


def _ticks(low: float, high: float) -> list[float]:
    """About five round tick values covering ``[low, high]``."""
    if high <= low:
        return [low]
    step = 10 ** math.floor(math.log10((high - low) / 5))
    for mult in (1, 2, 5, 10):
        if (high - low) / (step * mult) <= 6:
            step *= mult
            break
    first = math.ceil(low / step) * step
    return [first + k * step for k in range(int((high - first) / step + 1e-9) + 1)]


def _scale(values: Sequence[float], lo_px: float, hi_px: float) -> tuple[float, float, float]:
    """(low, high, pixels per unit) mapping ``values`` onto ``[lo_px, hi_px]`` with a margin."""
    low, high = min(values), max(values)
    pad = (high - low) * 0.05 or abs(high) * 0.05 or 1.0
    low, high = low - pad, high + pad
    return low, high, (hi_px - lo_px) / (high - low)


def scatter(points: Sequence[tuple[float, float]], front: Sequence[tuple[float, float]],
            axes: tuple[str, str], label: str, log: bool = False) -> str:
    """Every point in grey and the ``front`` points joined in colour (a Pareto front); ``log``:
    both axes logarithmic (points with a coordinate <= 0 are left out), ticks labelled in the
    original units, so that a few layouts 1,000x slower do not squeeze the rest into a corner."""
    if log:
        def lg(p: tuple[float, float]) -> tuple[float, float]:
            return math.log10(p[0]), math.log10(p[1])
        points = [lg(p) for p in points if p[0] > 0 and p[1] > 0]
        front = [lg(p) for p in front if p[0] > 0 and p[1] > 0]
    if not points:
        return _svg(40, [_text(10, 25, "no points")], label)
    left, right, top, bottom = 70.0, WIDTH - 20.0, 15.0, 300.0
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, sx = _scale(xs, left, right)
    y0, y1, sy = _scale(ys, 0, bottom - top)

    def px(x: float, y: float) -> tuple[float, float]:
        return left + (x - x0) * sx, bottom - (y - y0) * sy

    body = [f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="#333"/>']
    def tick(t: float) -> str:
        return f"{10 ** t:.3g}" if log else f"{t:.4g}"

    for t in _ticks(x0, x1):
        body.append(_text(px(t, y0)[0], bottom + 16, tick(t), "middle", 10))
    for t in _ticks(y0, y1):
        body.append(_text(left - 4, px(x0, t)[1] + 4, tick(t), "end", 10))
    # one circle per pixel: a sweep of 10^5 layouts stays a small page
    for ix, iy in sorted({(round(a), round(b)) for a, b in (px(x, y) for x, y in points)}):
        body.append(f'<circle cx="{ix}" cy="{iy}" r="2.5" fill="#bbb"/>')
    ordered = sorted(front)
    path = " ".join(f"{a:.1f},{b:.1f}" for a, b in (px(x, y) for x, y in ordered))
    body.append(f'<polyline points="{path}" fill="none" stroke="{PALETTE[3]}" stroke-width="1.5"/>')
    for x, y in ordered:
        cx, cy = px(x, y)
        shown = (10 ** x, 10 ** y) if log else (x, y)
        body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{PALETTE[3]}">'
                    f"<title>{escape(f'{axes[0]} {shown[0]:.4g}, {axes[1]} {shown[1]:.4g}')}"
                    "</title></circle>")
    scale = " (log)" if log else ""
    body.append(_text((left + right) / 2, bottom + 34, axes[0] + scale, "middle"))
    body.append(f'<text x="14" y="{(top + bottom) / 2:.0f}" font-size="12" text-anchor="middle" '
                f'transform="rotate(-90 14 {(top + bottom) / 2:.0f})">{escape(axes[1] + scale)}</text>')
    return _svg(bottom + 45, body, label)


def _fraction(value: float, low: float, high: float) -> float:
    return 0.0 if high <= low else (value - low) / (high - low)


def _shade(f: float) -> str:
    """Dark blue at 0 (the best value), pale yellow at 1, linearly in between."""
    a, b = (0x30, 0x5A, 0x9C), (0xF7, 0xF1, 0xC2)
    r, g, bl = (round(u + (v - u) * f) for u, v in zip(a, b, strict=True))
    return f"#{r:02x}{g:02x}{bl:02x}"


def heatmap(cells: Mapping[tuple[int, int], float], axes: tuple[str, str], unit: str,
            label: str) -> str:
    """A grid of ``cells[(row, column)]`` values (rows: ``axes[0]``, columns: ``axes[1]``);
    empty cells are grey. Darker is smaller."""
    rows = sorted({r for r, _ in cells})
    cols = sorted({c for _, c in cells})
    if not cells:
        return _svg(40, [_text(10, 25, "no cells")], label)
    cw, ch, left, top = min(110.0, (WIDTH - 80) / len(cols)), 34.0, 70.0, 30.0
    low, high = min(cells.values()), max(cells.values())
    body = [_text(left + cw * len(cols) / 2, 14, axes[1], "middle")]
    for j, c in enumerate(cols):
        body.append(_text(left + cw * (j + 0.5), top - 2, str(c), "middle", 11))
    for i, r in enumerate(rows):
        y = top + i * ch
        body.append(_text(left - 6, y + ch / 2 + 4, f"{axes[0]} {r}", "end", 11))
        for j, c in enumerate(cols):
            value = cells.get((r, c))
            fill = "#e5e5e5" if value is None else _shade(_fraction(value, low, high))
            tip = f"{axes[0]} {r}, {axes[1]} {c}: " + ("-" if value is None else f"{value:.4g} {unit}")
            body.append(_rect(left + j * cw, y, cw - 2, ch - 2, fill, tip))
            if value is not None:
                colour = "#fff" if _fraction(value, low, high) < 0.5 else "#000"
                body.append(f'<text x="{left + cw * (j + 0.5):.1f}" y="{y + ch / 2 + 4:.1f}" '
                            f'font-size="11" text-anchor="middle" fill="{colour}">'
                            f"{value:.4g}</text>")
    return _svg(top + ch * len(rows) + 10, body, label)


def histogram(edges: Sequence[float], counts: Sequence[float], unit: str, label: str) -> str:
    """Vertical bars of ``counts`` over the bins ``edges`` (len(counts) + 1), with the first, middle
    and last edges labelled in ``unit``."""
    top = max(counts, default=0.0)
    left, span, base, tall = 40.0, WIDTH - 60.0, 190.0, 160.0
    width = span / max(len(counts), 1)
    body = [_text(left - 6, base - tall + 4, f"{top:.0f}", "end"), _text(left - 6, base + 4, "0", "end")]
    for i, count in enumerate(counts):
        h = tall * count / top if top > 0 else 0.0
        tip = f"{edges[i]:.4g}-{edges[i + 1]:.4g} {unit}: {count:.0f}"
        body.append(_rect(left + i * width + 1, base - h, width - 2, h, PALETTE[0], tip))
    for i in (0, len(counts) // 2, len(counts)):
        body.append(_text(left + i * width, base + 18, f"{edges[i]:.4g}", "middle"))
    body.append(_text(left + span / 2, base + 36, unit, "middle"))
    return _svg(base + 46, body, label)
