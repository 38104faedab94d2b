"""Print the MPT validation tables (both engines) and draw the residual figures.

Run from the repository root: ``python analysis/validate_mpt.py [--rows] [--plot DIR]``. The rows
and the stack of each table live in ``tests/validation/mpt.py`` (the code the validation tests
run). Prints, per subset of the issue's table, the median and p90 |error| of tokens/s per GPU for
both engines; ``--rows`` adds every row; ``--plot DIR`` writes ``mpt-error-vs-seq.png`` (error
against the sequence length, one colour per GPU) and ``mpt-error-vs-gpus.png`` (error against the
GPU count at 2k tokens, one colour per GPU and attention kernel), with their SVG and CSV. Needs
matplotlib for ``--plot``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _guard import guarded

from tests.validation.mpt import BF16, SUBSETS, MptRow, error, predicted_tokens_per_gpu, summary

GPU_NAMES = {"h100_80gb": "H100 80GB", "a100_80gb": "A100 80GB", "a100_40gb": "A100 40GB"}


def table() -> None:
    """Per subset: rows, median and p90 |error|, mean signed error, both engines."""
    print("| subset | rows | analytical median / p90 | DES median / p90 | mean signed | bound |")
    print("|---|---:|---:|---:|---:|---:|")
    for sub in SUBSETS:
        fast = [error(r) for r in sub.rows]
        des = [error(r, "des") for r in sub.rows]
        (fm, fp), (dm, dp) = summary(fast), summary(des)
        print(f"| {sub.name} | {len(sub.rows)} | {fm:.1%} / {fp:.1%} | {dm:.1%} / {dp:.1%} | "
              f"{sum(fast) / len(fast):+.1%} | {sub.median_bound:.0%} |")


def rows_table() -> None:
    """Every bf16 row: published and predicted tokens/s per GPU, error, kernel."""
    print("\n| row | attention | published | analytical | error |")
    print("|---|---|---:|---:|---:|")
    for r in BF16:
        p = predicted_tokens_per_gpu(r)
        print(f"| {r.id} | {r.attention} | {r.tokens_per_s_per_gpu:.0f} | {p:.0f} | "
              f"{p / r.tokens_per_s_per_gpu - 1:+.1%} |")


def _point(r: MptRow) -> dict[str, Any]:
    return {"id": r.id, "gpu": GPU_NAMES[r.gpu], "gpus": r.gpus, "seq_len": r.seq_len,
            "attention": r.attention, "published": r.tokens_per_s_per_gpu, "error": error(r)}


def plot(out: Path) -> None:
    """The two residual figures of docs/validation.md."""
    from simcluster.report.figures import residuals

    points = [_point(r) for r in BF16]
    by_seq = [{**p, "group": p["gpu"]} for p in points]
    residuals(by_seq, out / "mpt-error-vs-seq.png", "seq_len", x_label="sequence length (tokens)",
              title="MPT bf16 (LLM Foundry): tokens/s per GPU, simcluster vs published")
    at_2k = [{**p, "group": f"{p['gpu']}, {p['attention']}"} for p in points
             if p["seq_len"] == 2048]
    residuals(at_2k, out / "mpt-error-vs-gpus.png", "gpus", x_label="GPUs",
              title="MPT bf16 at 2k tokens: error against the GPU count")
    print(f"wrote {out / 'mpt-error-vs-seq.png'}, {out / 'mpt-error-vs-gpus.png'}")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", action="store_true", help="print every row")
    parser.add_argument("--plot", metavar="DIR", default=None, help="write the residual figures")
    args = parser.parse_args(argv[1:])
    if args.plot is not None:
        import importlib

        importlib.import_module("matplotlib")  # say it is missing before the evaluations
    table()
    if args.rows:
        rows_table()
    if args.plot is not None:
        plot(Path(args.plot))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("validate_mpt.py", main, sys.argv))
