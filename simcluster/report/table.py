"""Plain-text tables for the terminal."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned first column, right-aligned others, columns sized to their widest cell."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [_line(r, widths) for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _line(row: Sequence[str], widths: Sequence[int]) -> str:
    first = row[0].ljust(widths[0])
    rest = [cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)]
    return "  ".join([first, *rest]).rstrip()


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
