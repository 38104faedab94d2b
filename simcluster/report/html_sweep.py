"""``simcluster report`` of a sweep's results directory: top table, Pareto front, rejections, TP x PP.

Reads ``results.parquet`` written by ``simcluster sweep`` (docs/sweep.md) with pyarrow, or a
``results.csv`` with the csv module, so the report layer does not import :mod:`simcluster.sweep`
(the layer above it).
Every number is recomputed from the rows: eligible rows are those with a ``rank``, the Pareto
front those with ``pareto`` true, rejections are counted from the ``status`` and ``reason``
columns, and each (TP, PP) cell of the heatmap holds the best step time of its eligible rows.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simcluster.errors import SpecError
from simcluster.report import svg
from simcluster.report.html import note, page, section, table

CSV_NAME = "results.csv"
PARQUET_NAME = "results.parquet"
REQUIRED = ("status", "reason", "rank", "pareto", "tp", "pp", "step_time_s")
TOP = 10
Row = dict[str, Any]


def _value(text: str) -> Any:
    """A CSV field as the sweep wrote it: empty -> None, true/false -> bool, numbers -> float."""
    if text == "":
        return None
    if text in ("true", "false"):
        return text == "true"
    try:
        return float(text)
    except ValueError:
        return text


def read_results(directory: Path) -> tuple[list[Row], Path]:
    """The rows of the sweep results in ``directory`` and the file they came from.

    Raises
    ------
    SpecError
        No such directory, no results file in it, or a results file without the sweep's columns.
    """
    if not directory.is_dir():
        raise SpecError("SWEEP_RESULTS", "no such directory", str(directory))
    path = directory / PARQUET_NAME
    if path.is_file():
        rows = _read_parquet(path)
    elif (directory / CSV_NAME).is_file():  # a table written by hand or by another tool
        path = directory / CSV_NAME
        with path.open(newline="", encoding="utf-8") as handle:
            rows = [{k: _value(v) for k, v in row.items()} for row in csv.DictReader(handle)]
    else:
        raise SpecError("SWEEP_RESULTS", f"no {CSV_NAME} or {PARQUET_NAME} here: not a "
                        "'simcluster sweep --out' directory (or the sweep has not finished)",
                        str(directory))
    missing = [c for c in REQUIRED if rows and c not in rows[0]]
    if not rows or missing:
        raise SpecError("columns", f"expected a sweep's results with columns {', '.join(REQUIRED)}"
                        + (f"; missing {', '.join(missing)}" if missing else "; no rows"), str(path))
    return rows, path


def _read_parquet(path: Path) -> list[Row]:
    import pyarrow.parquet as pq

    try:
        rows: list[Row] = pq.read_table(path).to_pylist()
    except Exception as err:  # pyarrow raises its own error types for damaged files
        raise SpecError("SWEEP_RESULTS", f"cannot read Parquet: {err}", str(path)) from None
    return rows


def eligible(rows: Sequence[Row]) -> list[Row]:
    """Rows the sweep ranked (timed, within the constraints), best first."""
    return sorted((r for r in rows if r.get("rank") is not None), key=lambda r: float(r["rank"]))


def layout(r: Row) -> str:
    """``tp2 pp4 cp1 dp8 ep1 mb1 1f1b z1 none sp`` from a row's layout columns (``etp1`` after
    the EP size where the experts are not split like TP)."""
    def i(key: str) -> str:
        v = r.get(key)
        return "-" if v is None else f"{int(v)}" if isinstance(v, float) and v.is_integer() else str(v)

    parts = [f"tp{i('tp')}", f"pp{i('pp')}", f"cp{i('cp')}", f"dp{i('dp')}", f"ep{i('ep')}"]
    if r.get("expert_tp") not in (None, "") and i("expert_tp") != i("tp"):
        parts.append(f"etp{i('expert_tp')}")  # whole experts (or another split) than TP's
    parts += [f"mb{i('micro_batch')}", str(r.get("schedule", "-"))]
    if (r.get("virtual_stages") or 1) != 1:
        parts.append(f"v{i('virtual_stages')}")
    parts += [f"z{i('zero_stage')}", str(r.get("recompute", "-"))]
    return " ".join([*parts, "sp"] if r.get("sequence_parallel") else parts)


TOP_COLUMNS = (("step s", "step_time_s"), ("tokens/s", "tokens_per_s"), ("MFU", "mfu"),
               ("GiB", "peak_memory_gib"), ("days", "time_to_train_days"),
               ("cost $", "cost_usd"), ("goodput", "goodput"))


def top_table(ranked: Sequence[Row]) -> str:
    """The best :data:`TOP` rows: rank, option, topology, GPUs, layout, engine and the numbers."""
    columns = [(h, k) for h, k in TOP_COLUMNS if any(r.get(k) is not None for r in ranked)]
    rows = [[int(r["rank"]), r.get("option") or "-", r.get("topology"), _int(r.get("gpus")),
             layout(r), r.get("engine") or "analytical", *(r.get(k) for _, k in columns)]
            for r in ranked[:TOP]]
    return section("top", f"Best {min(TOP, len(ranked))} of {len(ranked)} eligible layouts",
                   table(["#", "option", "topology", "GPUs", "layout", "engine",
                          *(h for h, _ in columns)], rows))


def _int(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def pareto_axes(ranked: Sequence[Row]) -> tuple[str, str]:
    """Time and cost to train when every eligible row has them; else step time and GPUs (as
    ``simcluster sweep`` does for scenarios without ``training.tokens`` or ``cost``)."""
    if ranked and all(r.get("time_to_train_days") is not None and r.get("cost_usd") is not None
                      for r in ranked):
        return "time_to_train_days", "cost_usd"
    return "step_time_s", "gpus"


def pareto_figure(ranked: Sequence[Row]) -> str:
    """Every eligible layout in grey and the sweep's Pareto front (``pareto`` column) joined."""
    x, y = pareto_axes(ranked)
    points = [(float(r[x]), float(r[y])) for r in ranked]
    front = [(float(r[x]), float(r[y])) for r in ranked if r.get("pareto") is True]
    return section("pareto", f"Pareto front ({x} vs {y}, log-log)",
                   note(f"{len(front)} layouts on the front, {len(points)} eligible; identical "
                        "points are drawn once."),
                   svg.scatter(points, front, (x, y), "Pareto front", log=True))


def rejections(rows: Sequence[Row]) -> list[tuple[str, str, int, str]]:
    """(status, key, count, example reason) of every rejected row, most frequent first.

    ``rule`` rows are keyed by the scenario key their reason names (``key: message``), ``memory``
    rows by ``memory``; timed rows without a rank were cut by a constraint (``--max-days``,
    ``--max-cost``).
    """
    counts: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], str] = {}
    for r in rows:
        status, reason = str(r.get("status")), str(r.get("reason") or "")
        if status == "ok":
            if r.get("rank") is not None:
                continue
            key, reason = "constraint", "timed, outside --max-days / --max-cost"
        else:
            key = reason.split(":", 1)[0] if ":" in reason else status
        counts[status, key] += 1
        examples.setdefault((status, key), reason)
    return [(s, k, n, examples[s, k]) for (s, k), n in counts.most_common()]


def rejection_table(rows: Sequence[Row]) -> str:
    """The rejection counts, recomputed from the rows."""
    found = rejections(rows)
    body = (table(["status", "key", "rows", "example"], [[s, k, n, e] for s, k, n, e in found])
            if found else note("no row was rejected"))
    return section("rejections", "Rejected candidates", note(
        f"{len(rows)} rows: {sum(n for *_, n, _ in found)} rejected. Splits rejected before their "
        "completions were enumerated are not rows of the results and are not counted here."), body)


def tp_pp_cells(ranked: Sequence[Row]) -> dict[tuple[int, int], float]:
    """The best (smallest) step time of the eligible rows of each (tp, pp)."""
    cells: dict[tuple[int, int], float] = {}
    for r in ranked:
        key = (int(r["tp"]), int(r["pp"]))
        cells[key] = min(cells.get(key, float("inf")), float(r["step_time_s"]))
    return cells


def heatmap_figure(ranked: Sequence[Row], option: str = "", index: int = 0) -> str:
    """TP x PP heatmap of the best step time per cell (grey: no eligible layout) of one hardware
    option's rows (the whole sweep when it has one option)."""
    title = "Best step time per TP x PP (s)" + (f": {option}" if option else "")
    return section(f"heatmap-{index}" if index else "heatmap", title,
                   svg.heatmap(tp_pp_cells(ranked), ("tp", "pp"), "s", f"TP x PP heatmap {option}"))


def heatmap_figures(ranked: Sequence[Row]) -> list[str]:
    """One :func:`heatmap_figure` per hardware option, in the order options first rank."""
    options: list[str] = []
    for r in ranked:
        name = str(r.get("option") or "")
        if name not in options:
            options.append(name)
    return [heatmap_figure([r for r in ranked if str(r.get("option") or "") == name], name, n)
            for n, name in enumerate(options)]


def sweep_page(rows: Sequence[Row], source: Path) -> str:
    """The report page of a sweep's results read from ``source``."""
    ranked = eligible(rows)
    sections = [note(f"results: {source}")]
    if ranked:
        sections += [top_table(ranked), pareto_figure(ranked)]
    else:
        sections.append(note("no eligible layout: every candidate was rejected"))
    sections.append(rejection_table(rows))
    if ranked:
        sections += heatmap_figures(ranked)
    return page(f"simcluster report: sweep {source.parent.name}", sections)
