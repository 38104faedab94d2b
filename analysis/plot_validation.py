"""Figure: simcluster's prediction against the published number for every validation source.

Evaluates the cases of the validation suite (``tests/validation``: SC'21 and Megatron v1 tables,
torchtitan FSDP, vTrain's single-node rows, the MPT tables, Llama 3 405B) with the analytical
engine, and draws predicted against published on log-log axes with y = x and a +-10% band. Writes a
PNG, an SVG and a CSV of every point (default: ``validation.png`` in the current directory). Needs
matplotlib.
Usage: ``python analysis/plot_validation.py [--out FILE]``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _guard import guarded
from _inputs import output

from simcluster.report.figures import validation_scatter
from simcluster.run.single import simulate
from simcluster.spec import load_scenario
from tests.validation import megatron_v1, mpt, sc21, torchtitan, vtrain
from tests.validation.test_llama3_throughput import ROWS as LLAMA3_ROWS
from tests.validation.test_llama3_throughput import SCENARIO as LLAMA3_SCENARIO


def _point(source: str, quantity: str, case: str, published: float,
           predicted: float) -> dict[str, Any]:
    return {"source": source, "quantity": quantity, "case": case, "published": published,
            "predicted": predicted, "error": predicted / published - 1}


def tables() -> list[dict[str, Any]]:
    """SC'21, Megatron v1 and torchtitan: their ``table()`` rows, analytical engine."""
    sc = [_point("SC'21", "TFLOP/s per GPU", c.id, c.tflops, sc21.predicted_tflops(sc21.scenario(c)))
          for c in sc21.CASES]
    v1 = [_point("Megatron v1", "iteration ms", c.id, c.iteration_ms, megatron_v1.predicted_ms(c))
          for c in megatron_v1.CASES]
    tt = [_point("torchtitan", "tokens/s per GPU", c.id, c.wps, torchtitan.predicted_wps(c))
          for c in torchtitan.CASES]
    return sc + v1 + tt


def vtrain_points() -> list[dict[str, Any]]:
    """vTrain's rows simcluster can map (``unmappable`` is None), analytical engine."""
    rows = [r for r in vtrain.load_rows() if vtrain.unmappable(r) is None]
    return [_point("vTrain", "iteration ms", f"row {r.index}", r.iteration_ms,
                   vtrain.predicted_ms(r)) for r in rows]


def mpt_points() -> list[dict[str, Any]]:
    """MosaicML LLM Foundry's MPT bf16 rows (A100 and H100), tokens/s per GPU."""
    return [_point("MPT (LLM Foundry)", "tokens/s per GPU", r.id, r.tokens_per_s_per_gpu,
                   mpt.predicted_tokens_per_gpu(r)) for r in mpt.BF16]


def llama3_points() -> list[dict[str, Any]]:
    """Llama 3 405B's three published throughputs (range check)."""
    rows: list[tuple[str, list[str], float]] = [
        (str(v[0]), list(cast(list[str], v[1])), float(cast(float, v[2])))
        for v in (getattr(row, "values", row) for row in LLAMA3_ROWS)]  # pytest.param or tuple
    return [_point("Llama 3 405B", "TFLOP/s per GPU", label, published,
                   simulate(load_scenario(LLAMA3_SCENARIO, overrides),
                            engine="analytical").to_dict()["model_tflops_per_gpu"])
            for label, overrides, published in rows]


def main(argv: Sequence[str]) -> int:
    """Evaluate every source, print the medians, draw the scatter."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=None, help="figure path (PNG; SVG and CSV beside it)")
    args = parser.parse_args(argv[1:])
    importlib.import_module("matplotlib")  # say it is missing before the evaluations
    points = tables() + vtrain_points() + mpt_points() + llama3_points()
    for source in dict.fromkeys(p["source"] for p in points):
        errors = sorted(abs(p["error"]) for p in points if p["source"] == source)
        print(f"{source:14s} {len(errors):5d} points, median |error| {errors[len(errors) // 2]:.1%}")
    written = validation_scatter(points, output(args.out, Path("validation.png")),
                                 title="simcluster vs published (analytical engine)")
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(guarded("plot_validation.py", main, sys.argv))
