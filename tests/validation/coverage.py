"""Validation coverage: which published runs cover which accelerator x stack x precision x model
family, and how far simcluster's closed form is from each of them.

    python -m tests.validation.coverage     # re-predicts every row (about 2 minutes)

writes ``tests/validation/data/coverage_rows.csv`` (one line per published run: source, row id,
setting, error) and the summary simcluster reads, ``simcluster/catalog/validation.yaml``.
``tests/validation/test_coverage.py`` checks that the summary is the aggregate of the rows and
re-predicts a sample of rows, so neither file can drift from the model or be typed by hand.

Error convention everywhere: predicted over measured throughput, minus 1 (positive: simcluster is
faster than the run measured, the direction that under-budgets a purchase).
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from simcluster.run.single import simulate
from simcluster.run.validation import setting
from simcluster.spec.scenario import Scenario
from tests.validation import megatron_v1, mpt, nvidia, sc21, torchtitan, vtrain

ROOT = Path(__file__).resolve().parents[2]
ROWS_CSV = Path(__file__).resolve().parent / "data" / "coverage_rows.csv"
SUMMARY = ROOT / "simcluster" / "catalog" / "validation.yaml"
SETTING = ("accelerator", "arch", "stack", "precision", "family", "sharding")
FIELDS = ("source", "id", *SETTING, "error")


@dataclass(frozen=True)
class Source:
    """A visible published source: its citation, its test and how to re-predict one row."""

    name: str
    citation: str
    test: str
    rows: Callable[[], Iterator[tuple[str, Scenario, float]]]  # (row id, scenario, measured)
    predicted: Callable[[Scenario], float]  # simcluster's closed form, in the measured unit
    measured_is_time: bool  # measured is a time per step (else a throughput)


def _sc21() -> Iterator[tuple[str, Scenario, float]]:
    for case in sc21.CASES:
        yield case.id, sc21.scenario(case), case.tflops


def _v1() -> Iterator[tuple[str, Scenario, float]]:
    for case in megatron_v1.CASES:
        yield case.id, megatron_v1.scenario(case), case.iteration_ms


def _torchtitan() -> Iterator[tuple[str, Scenario, float]]:
    for case in torchtitan.CASES:
        yield case.id, torchtitan.scenario(case), case.wps


def _vtrain() -> Iterator[tuple[str, Scenario, float]]:
    for row in vtrain.load_rows():
        if vtrain.unmappable(row) is None:
            yield row.id, vtrain.scenario(row), row.iteration_ms


def _mpt() -> Iterator[tuple[str, Scenario, float]]:
    for row in mpt.ROWS:
        yield row.id, mpt.scenario(row), row.tokens_per_s_per_gpu


def _nvidia() -> Iterator[tuple[str, Scenario, float]]:
    cases, _ = nvidia.mapped_rows()
    for case in cases:
        yield case.id, nvidia.scenario(case), case.tokens_per_s_per_gpu


def _ms(s: Scenario) -> float:
    return simulate(s, engine="analytical").step.iteration_time_s * 1e3


def _tokens_per_gpu(s: Scenario) -> float:
    seconds = simulate(s, engine="analytical").step.iteration_time_s
    return s.parallelism.global_batch * s.model.seq_len / seconds / s.cluster.gpus


SOURCES = (
    Source("sc21", "Narayanan et al., SC'21 (arXiv 2104.04473), Tables 1 and 2: TFLOP/s per GPU",
           "tests/validation/test_sc21.py", _sc21, sc21.predicted_tflops, False),
    Source("megatron-v1",
           "NVIDIA/Megatron-LM README scaling tables, September 2020 (images/tables.tex @5281919)",
           "tests/validation/test_megatron_v1.py", _v1, _ms, True),
    Source("torchtitan", "pytorch/torchtitan docs/performance.md @04133643, FSDP2 on 64 A100",
           "tests/validation/test_torchtitan_fsdp.py", _torchtitan, _tokens_per_gpu, False),
    Source("vtrain",
           "Bang et al., vTrain, MICRO 2024 (arXiv 2312.12391): single-node Megatron-DeepSpeed runs",
           "tests/validation/test_vtrain.py", _vtrain, _ms, True),
    Source("mpt", "mosaicml/llm-foundry scripts/train/benchmarking/README.md @8c8dd48f, MPT tables",
           "tests/validation/test_mpt.py", _mpt, _tokens_per_gpu, False),
    Source("nvidia", "NVIDIA NeMo 24.07 and Megatron-Bridge 25.09-26.08 performance summaries",
           "tests/validation/test_nvidia.py", _nvidia, _tokens_per_gpu, False),
)


def throughput_error(source: Source, s: Scenario, measured: float) -> float:
    """Predicted over measured throughput, minus 1 (closed form): a time per step inverts."""
    predicted = source.predicted(s)
    return measured / predicted - 1.0 if source.measured_is_time else predicted / measured - 1.0


def row_error(source: Source, row_id: str) -> float:
    """Re-predict one stored row (the test's sample)."""
    for rid, s, measured in source.rows():
        if rid == row_id:
            return throughput_error(source, s, measured)
    raise KeyError(f"{source.name}: no row {row_id}")


def collect() -> list[dict[str, str]]:
    out = []
    for source in SOURCES:
        for rid, s, measured in source.rows():
            error = throughput_error(source, s, measured)
            out.append({"source": source.name, "id": rid, **setting(s), "error": f"{error:.5f}"})
    return out


def summarise(rows: list[dict[str, str]]) -> list[dict[str, object]]:
    """One entry per (setting, source): rows, median and nearest-rank p90 of |error|, mean error."""
    groups: dict[tuple[str, ...], list[float]] = {}
    for r in rows:
        groups.setdefault((*(r[k] for k in SETTING), r["source"]), []).append(float(r["error"]))
    out: list[dict[str, object]] = []
    for key, errors in sorted(groups.items()):
        ordered = sorted(abs(e) for e in errors)
        p90 = ordered[max(0, -(-9 * len(ordered) // 10) - 1)]
        out.append({**dict(zip(SETTING, key[:-1], strict=True)), "source": key[-1],
                    "rows": len(errors), "median_abs_error": round(statistics.median(ordered), 4),
                    "p90_abs_error": round(p90, 4), "mean_error": round(statistics.fmean(errors), 4)})
    return out


def summary_document(rows: list[dict[str, str]]) -> dict[str, object]:
    return {
        "schema": "simcluster/validation-coverage/1",
        "generated_by": "python -m tests.validation.coverage (do not edit by hand)",
        "engine": "analytical",
        "error": "predicted / measured throughput - 1 (positive: simcluster faster than measured)",
        "sources": {s.name: {"citation": s.citation, "test": s.test} for s in SOURCES},
        "settings": summarise(rows),
    }


def write(rows: list[dict[str, str]]) -> None:
    with ROWS_CSV.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    header = ("# Validation coverage of simcluster's closed form, generated by\n"
              "# `python -m tests.validation.coverage` from the rows in\n"
              "# tests/validation/data/coverage_rows.csv; tests/validation/test_coverage.py checks it.\n")
    body = yaml.safe_dump(summary_document(rows), sort_keys=False, width=100)
    SUMMARY.write_text(header + body)


def read_rows() -> list[dict[str, str]]:
    with ROWS_CSV.open(newline="") as f:
        return list(csv.DictReader(f))


if __name__ == "__main__":
    write(collect())
