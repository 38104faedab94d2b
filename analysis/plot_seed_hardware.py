"""Figures: the seeds' hardware questions, a 10B GPT on consumer boxes, servers and the cloud.

1. ``seed-10b-boxes.png``: time to train against cost for every layout of every hardware option of
   ``scenarios/seed-10b-boxes.yaml`` (2x/4x RTX 3090 Ti boxes with and without NVLink bridges, DGX
   A100 bought, A100 and H100 rented), drawn by ``plot_planning.py``.
2. ``seed-comm-share.png``: the share of the step spent in communication (TP, PP, DP exposed) on
   NVLink-bridged and PCIe-only boxes at 4, 16 and 64 micro-batches per pipeline per step
   (``scenarios/seed-comm-share.yaml``), stacked bars.

Each figure gets a CSV beside it. Needs matplotlib (``pip install simcluster[plots]``).
Usage: ``python analysis/plot_seed_hardware.py [--out-dir DIR]`` (default ``docs/img``).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _guard import guarded
from plot_planning import best_per_option, read_layouts
from plot_planning import plot as plot_planning

import simcluster

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
#: Communication categories of the time breakdown, in stacking order.
COMM = ("tp_comm_s", "pp_comm_s", "dp_comm_s")


def hardware_figure(out_dir: Path) -> Path:
    """Sweep seed-10b-boxes.yaml, plot every timed layout, and keep each option's cheapest in a CSV."""
    png = out_dir / "seed-10b-boxes.png"
    with tempfile.TemporaryDirectory() as tmp:
        simcluster.sweep(str(SCENARIOS / "seed-10b-boxes.yaml"), out=tmp, jobs=1)
        layouts = read_layouts(Path(tmp) / "results.parquet")
    plot_planning(layouts, png, "10B GPT, 300B tokens: RTX 3090 Ti boxes vs DGX A100 vs rented GPUs")
    best = best_per_option(layouts).values()
    write_csv([{"option": b.option, "nodes": b.nodes, "layout": b.label, "time_to_train_days": b.days,
                "cost_usd": b.cost_usd} for b in best], out_dir / "seed-10b-boxes.csv")
    return png


def comm_shares(scenario: Path) -> list[dict[str, Any]]:
    """One row per (option, global batch): step time and each communication category's share."""
    df = simcluster.sweep(str(scenario), jobs=1, out=None)
    rows = []
    for _, r in df.sort_values(["option", "parallelism.global_batch"]).iterrows():
        step = float(r["step_time_s"])
        row: dict[str, Any] = {"option": r["option"], "global_batch": int(r["parallelism.global_batch"]),
                               "micro_batches": int(r["parallelism.global_batch"]) // int(r["dp"]),
                               "step_time_s": step}
        row.update({c.removesuffix("_s") + "_share": float(r[c]) / step for c in COMM})
        row["comm_share"] = sum(row[c.removesuffix("_s") + "_share"] for c in COMM)
        rows.append(row)
    return rows


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """``rows`` as a CSV with the first row's keys as header."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def comm_figure(out_dir: Path) -> Path:
    """Stacked communication shares per option and micro-batch count."""
    rows = comm_shares(SCENARIOS / "seed-comm-share.yaml")
    write_csv(rows, out_dir / "seed-comm-share.csv")
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [f"{r['option']}\n{r['micro_batches']} mb/step" for r in rows]
    bottom = [0.0] * len(rows)
    for cat in COMM:
        key = cat.removesuffix("_s") + "_share"
        values = [100 * r[key] for r in rows]
        ax.bar(labels, values, bottom=bottom, label=cat.removesuffix("_s"))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    for x, total in enumerate(bottom):
        ax.annotate(f"{total:.1f}%", (x, total), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("exposed communication, % of the step")
    ax.set_title("10B GPT on 8 boxes of 4x RTX 3090 Ti (TP2 PP4 DP4): NVLink vs PCIe")
    ax.legend()
    fig.tight_layout()
    png = out_dir / "seed-comm-share.png"
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return png


def main(argv: Sequence[str]) -> int:
    """Draw both figures into ``--out-dir``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir", default=str(ROOT / "docs" / "img"))
    args = parser.parse_args(argv[1:])
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for png in (hardware_figure(out_dir), comm_figure(out_dir)):
        print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_seed_hardware.py", main, sys.argv))
