"""Plain-text tables for the terminal."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
                 wrap: Mapping[int, int] | None = None) -> str:
    """Left-aligned first column, right-aligned others, columns sized to their widest cell.

    ``wrap`` maps a column index to a width: that column's text is left-aligned and wrapped onto
    as many lines as it needs (the other cells of the row stay on its first line)."""
    wrap = wrap or {}
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    split = [[textwrap.wrap(c, wrap[i]) or [""] if i in wrap else [c] for i, c in enumerate(r)]
             for r in cells]
    widths = [max(len(piece) for r in split for piece in r[i]) for i in range(len(headers))]
    lines = []
    for r in split:
        for k in range(max(len(parts) for parts in r)):
            row = [parts[k] if k < len(parts) else "" for parts in r]
            lines.append(_line(row, widths, wrap))
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _line(row: Sequence[str], widths: Sequence[int], wrapped: Mapping[int, int]) -> str:
    first = row[0].ljust(widths[0])
    rest = [cell.ljust(w) if i in wrapped else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row[1:], widths[1:], strict=True), start=1)]
    return "  ".join([first, *rest]).rstrip()


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
