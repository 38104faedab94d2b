"""The validation coverage simcluster prints (``simcluster/catalog/validation.yaml``) is what the
validation sources give today: every row re-predicted, the summary re-aggregated."""

from __future__ import annotations

import yaml

from tests.validation import coverage


def test_every_row_is_what_the_model_predicts_today() -> None:
    stored = coverage.read_rows()
    fresh = coverage.collect()
    assert [(r["source"], r["id"]) for r in fresh] == [(r["source"], r["id"]) for r in stored], (
        "rows added or removed: python -m tests.validation.coverage")
    for old, new in zip(stored, fresh, strict=True):
        assert {k: old[k] for k in coverage.SETTING} == {k: new[k] for k in coverage.SETTING}
        assert abs(float(old["error"]) - float(new["error"])) <= 5e-5, (
            f"{old['id']}: stored {old['error']}, now {new['error']}: "
            "python -m tests.validation.coverage")


def test_the_summary_is_the_aggregate_of_the_rows() -> None:
    packaged = yaml.safe_load(coverage.SUMMARY.read_text())
    assert packaged == coverage.summary_document(coverage.read_rows())


def test_summary_oracle() -> None:
    """Median, nearest-rank p90 and signed mean of one hand-made group."""
    rows = [{"source": "x", "id": str(i), "accelerator": "a", "arch": "b", "stack": "s",
             "precision": "bf16", "family": "dense", "sharding": "replicated",
             "error": str(e)}
            for i, e in enumerate([0.1, -0.2, 0.3, 0.05, -0.01])]
    (entry,) = coverage.summarise(rows)
    assert entry["rows"] == 5
    assert entry["median_abs_error"] == 0.1
    assert entry["p90_abs_error"] == 0.3  # ceil(0.9 x 5) = 5th of 5
    assert entry["mean_error"] == 0.048
