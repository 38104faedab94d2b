"""Reading simcluster outputs for the plot scripts: a file that is not what it should be raises
``SpecError`` naming the file and what was expected (``_guard`` prints it as one line, exit 2)."""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simcluster.errors import SpecError


def read_json(path: Path, needs: Sequence[str], what: str) -> dict[str, Any]:
    """The JSON object in ``path``, which must hold every key of ``needs``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise SpecError("", f"not JSON ({err.msg}, line {err.lineno}): expected {what}",
                        str(path)) from None
    if not isinstance(data, dict):
        raise SpecError("", f"expected a JSON object: {what}", str(path))
    missing = [k for k in needs if k not in data]
    if missing:
        raise SpecError(missing[0], f"missing key: expected {what}", str(path))
    return data


def read_csv(path: Path, needs: Sequence[str], what: str) -> list[dict[str, str]]:
    """The rows of the table ``path`` (CSV, gzip-compressed ``.csv.gz``, or the sweep's
    ``.parquet``) as text, whose header must name every column of ``needs``."""
    rows = read_rows(path)
    if not rows:
        raise SpecError("", f"no rows: expected {what}", str(path))
    missing = [c for c in needs if c not in rows[0]]
    if missing:
        raise SpecError(missing[0], f"missing column: expected {what}", str(path))
    return rows


def read_rows(path: Path) -> list[dict[str, str]]:
    """Every row of a CSV, ``.csv.gz`` or Parquet table, each value as its CSV text ('' for null)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        if not path.is_file():  # the same one-line OSError as a missing CSV
            raise FileNotFoundError(2, "No such file or directory", str(path))
        try:
            table = pq.read_table(path).to_pylist()
        except Exception as err:  # pyarrow raises its own error types for damaged files
            raise SpecError("", f"cannot read Parquet: {err}", str(path)) from None
        return [{k: _text(v) for k, v in row.items()} for row in table]
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _text(value: object) -> str:
    """A Parquet value as the sweep's CSV writes it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def number(row: dict[str, str], column: str, line: int, path: Path) -> float:
    """``row[column]`` as a float, or ``SpecError`` naming the line and column."""
    text = (row.get(column) or "").strip()
    try:
        return float(text)
    except ValueError:
        raise SpecError(f"line {line}.{column}", f"expected a number, got {text!r}",
                        str(path)) from None


def output(args_out: str | None, default: Path) -> Path:
    """``--out`` when given, else ``default``."""
    return Path(args_out) if args_out else default
