"""Print simcluster against NVIDIA's published NeMo / Megatron-Bridge throughput (both engines).

Run from the repository root: ``python analysis/validate_nvidia.py [--no-des] [--ids]``. The rows,
their scenarios and the reasons a row cannot be expressed live in ``tests/validation/nvidia.py``
(data: ``tests/validation/data/nvidia_perf_summaries.yaml``; what NVIDIA's labels and recipes mean:
``tests/validation/data/nvidia_stack_notes.md``). Prints a Markdown table of every mapped row
(measured tokens/s per GPU, the analytical and DES predictions, their errors, whether the step fits
in memory), then per subset (dense FP8 on H100; dense FP8/MXFP8/NVFP4 on Blackwell; long sequence
with context parallelism) the median and p90 |error|, then the rows simcluster cannot express and
why. A row whose scenario the loader refuses today (a precision or recipe not implemented yet) is
reported as "not expressible yet: <the loader's message>"; a row whose topology file is missing is
"pending". ``--no-des`` skips the DES (the analytical pass alone takes seconds); ``--ids`` lists
every unexpressible row id instead of counts per model.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _guard import guarded

from simcluster.errors import SpecError
from simcluster.run.single import simulate
from tests.validation.nvidia import (
    SUBSETS,
    NvidiaCase,
    Unexpressible,
    mapped_rows,
    scenario,
    summary,
)


@dataclass(frozen=True)
class Evaluation:
    """One row's predictions (tokens/s per GPU), or why there is none."""

    case: NvidiaCase
    analytical: float | None = None
    des: float | None = None
    fits: bool | None = None
    problem: str | None = None

    def error(self, engine: str) -> float | None:
        value = self.analytical if engine == "analytical" else self.des
        return None if value is None else value / self.case.tokens_per_s_per_gpu - 1.0


def evaluate(case: NvidiaCase, des: bool = True) -> Evaluation:
    """Both engines on ``case``; a refused scenario or a missing topology becomes ``problem``."""
    if case.pending is not None:
        return Evaluation(case, problem=f"pending: {case.pending}")
    try:
        s = scenario(case)
        run = simulate(s, engine="analytical")
        tokens = s.parallelism.global_batch * s.model.seq_len / s.cluster.gpus
        analytical = tokens / run.step.iteration_time_s
        des_value = tokens / simulate(s, engine="des").step.iteration_time_s if des else None
    except SpecError as err:
        return Evaluation(case, problem=f"not expressible yet: {err}")
    return Evaluation(case, analytical, des_value, run.memory.fits_in_memory)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:+.1%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def rows_table(results: list[Evaluation]) -> None:
    """Every mapped row, by subset."""
    print("| row | model | GPU | GPUs | layout | precision | measured | analytical | DES | "
          "error (an.) | error (DES) | fits | notes |")
    print("|---|---|---|---:|---|---|---:|---:|---:|---:|---:|---|---|")
    for r in sorted(results, key=lambda r: (SUBSETS.index(r.case.subset), r.case.id)):
        c = r.case
        precision = c.precision + (f"/{c.fp8_recipe}" if c.fp8_recipe else "")
        measured = f"{c.tokens_per_s_per_gpu:.0f}" + ("*" if c.derived else "")
        fits = "-" if r.fits is None else ("yes" if r.fits else "no")
        notes = "; ".join(([r.problem] if r.problem else []) + list(c.notes))
        print(f"| {c.id} | {c.model} | {c.system} | {c.gpus} | {c.layout} | {c.label} -> "
              f"{precision} | {measured} | {_num(r.analytical)} | {_num(r.des)} | "
              f"{_pct(r.error('analytical'))} | {_pct(r.error('des'))} | {fits} | {notes} |")
    print("\n\\* derived from the published TFLOP/s per GPU with NeMo's FLOPs formula.")


def subsets_table(results: list[Evaluation]) -> None:
    """Per subset: rows evaluated, median and p90 |error| of both engines, mean signed error."""
    print("\n| subset | mapped | evaluated | analytical median / p90 | DES median / p90 | "
          "mean signed (an.) |")
    print("|---|---:|---:|---:|---:|---:|")
    for subset in SUBSETS:
        rows = [r for r in results if r.case.subset == subset]
        fast = [e for r in rows if (e := r.error("analytical")) is not None]
        des = [e for r in rows if (e := r.error("des")) is not None]
        fast_text = "{:.1%} / {:.1%}".format(*summary(fast)) if fast else "-"
        des_text = "{:.1%} / {:.1%}".format(*summary(des)) if des else "-"
        mean = f"{sum(fast) / len(fast):+.1%}" if fast else "-"
        print(f"| {subset} | {len(rows)} | {len(fast)} | {fast_text} | {des_text} | {mean} |")


def unexpressible_table(left: list[Unexpressible], ids: bool) -> None:
    """The rows simcluster cannot describe, grouped by published model and reason."""
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for u in left:
        groups[(u.model, u.reason)].append(u.id)
    print(f"\nUnexpressible rows: {len(left)}\n")
    print("| model (as published) | rows | reason |" + (" ids |" if ids else ""))
    print("|---|---:|---|" + ("---|" if ids else ""))
    for (model, reason), members in sorted(groups.items()):
        tail = f" {', '.join(members)} |" if ids else ""
        print(f"| {model} | {len(members)} | {reason} |{tail}")


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-des", action="store_true", help="skip the DES (analytical only)")
    parser.add_argument("--ids", action="store_true", help="list every unexpressible row id")
    args = parser.parse_args(argv[1:])
    cases, left = mapped_rows()
    results = [evaluate(c, des=not args.no_des) for c in cases]
    rows_table(results)
    subsets_table(results)
    unexpressible_table(left, args.ids)
    return 0


if __name__ == "__main__":
    sys.exit(guarded("validate_nvidia.py", main, sys.argv))
