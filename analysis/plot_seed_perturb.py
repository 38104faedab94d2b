"""Figure: a link degraded from 800G to 400G, one slow GPU, and long-tail stragglers over a run.

``scenarios/seed-degraded-stragglers.yaml`` (Llama 3 8B, 8 DGX H100, TP8 PP2 DP4). Left: the step
time breakdown by the discrete-event engine for the healthy cluster, every scale-out link at half
its bandwidth (the file as written), and one GPU at half speed. Right: goodput of the whole run
with fail-slow episodes (2x slower steps, ~6 h median) against the time to detect and evict the
slow node (the file's sweep section). Writes ``seed-degraded-stragglers.png`` and a CSV of each
panel. Needs matplotlib (``pip install simcluster[plots]``).
Usage: ``python analysis/plot_seed_perturb.py [--out-dir DIR] [--replicas N]``.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _guard import guarded

import simcluster
from simcluster.run.single import engine_step
from simcluster.spec import load_scenario

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "seed-degraded-stragglers.yaml"
#: Case name -> overrides of the scenario file.
CASES: dict[str, tuple[str, ...]] = {
    "healthy": ("perturbations.link_bandwidth=[]",),
    "links 800G->400G": (),
    "one GPU at 0.5x": ("perturbations.link_bandwidth=[]",
                        "perturbations.gpu_slowdown=[{node: 0, gpu: 3, factor: 0.5}]"),
}
CATEGORIES = ("compute", "tp_comm", "pp_comm", "dp_comm", "bubble")


def step_rows() -> list[dict[str, Any]]:
    """One row per case: the DES step time and its breakdown (s)."""
    rows = []
    for name, overrides in CASES.items():
        step, _ = engine_step(load_scenario(SCENARIO, list(overrides)), engine="des")
        breakdown = step.breakdown.as_dict()
        rows.append({"case": name, "step_time_s": step.iteration_time_s,
                     **{c: float(breakdown.get(c, 0.0)) for c in CATEGORIES}})
    return rows


def detect_rows(replicas: int) -> list[dict[str, Any]]:
    """Goodput against the straggler detection time (the file's sweep section)."""
    df = simcluster.sweep(str(SCENARIO), jobs=1, out=None, replicas=replicas)
    rows = [{"straggler_detect_s": float(r["reliability.straggler_detect_s"]), "goodput": float(r["goodput"]),
             "days": float(r["goodput_time_to_train_days"])} for _, r in df.iterrows()]
    return sorted(rows, key=lambda r: r["straggler_detect_s"])


def write_csv(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """``rows`` as a CSV with the first row's keys as header."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot(steps: Sequence[dict[str, Any]], detect: Sequence[dict[str, Any]], png: Path) -> None:
    """Stacked step breakdowns (left), goodput vs detection time (right)."""
    matplotlib: Any = importlib.import_module("matplotlib")
    matplotlib.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    bottom = [0.0] * len(steps)
    for cat in CATEGORIES:
        values = [r[cat] for r in steps]
        left.bar([r["case"] for r in steps], values, bottom=bottom, label=cat)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    for x, r in enumerate(steps):
        left.annotate(f"{r['step_time_s']:.2f} s", (x, r["step_time_s"]), ha="center", va="bottom",
                      fontsize=8)
    left.set_ylabel("step time, s (DES)")
    left.set_title("Llama 3 8B, 64 H100: one step")
    left.legend(fontsize=8)
    minutes = [r["straggler_detect_s"] / 60 for r in detect]
    right.plot(minutes, [100 * r["goodput"] for r in detect], "o-")
    right.set_xscale("log")
    right.set_xlabel("time to detect and evict a slow node, min")
    right.set_ylabel("goodput, %")
    right.set_title("whole run with 2x fail-slow episodes")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str]) -> int:
    """Run both panels and draw the figure into ``--out-dir``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir", default=str(ROOT / "docs" / "img"))
    parser.add_argument("--replicas", type=int, default=200)
    args = parser.parse_args(argv[1:])
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    steps, detect = step_rows(), detect_rows(args.replicas)
    write_csv(steps, out / "seed-degraded-steps.csv")
    write_csv(detect, out / "seed-straggler-detect.csv")
    plot(steps, detect, out / "seed-degraded-stragglers.png")
    for r in steps:
        print(f"{r['case']:<18} {r['step_time_s']:.3f} s")
    print(f"wrote {out / 'seed-degraded-stragglers.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_seed_perturb.py", main, sys.argv))
