"""The sweep ranks distinct shapes (issue 24 item 6): rows whose results are identical by
construction (schedule names at pp = 1, equivalent hardware options) are one row."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.sweep.report import _variants_text, distinct_shapes, shape_text


def _row(option: str = "a", pp: int = 1, schedule: str = "1f1b", step: float = 10.0,
         mem: float = 20.0, cost: float = 100.0) -> dict[str, Any]:
    return {"option": option, "tp": 1, "pp": pp, "cp": 1, "ep": 1, "dp": 8, "micro_batch": 1,
            "schedule": schedule, "virtual_stages": 1, "recompute": "none",
            "sequence_parallel": False, "zero_stage": 1, "step_time_s": step,
            "peak_memory_gib": mem, "cost_usd": cost, "capital_usd": None, "goodput": None,
            "gpus": 8}


def test_the_schedule_is_dropped_without_a_pipeline_oracle() -> None:
    assert shape_text(_row(schedule="gpipe")) == "tp1 pp1 dp8 mb1 none z1"
    assert shape_text(_row(pp=2, schedule="gpipe")) == "tp1 pp2 dp8 mb1 gpipe none z1"


def test_rows_that_would_read_alike_name_their_schedule() -> None:
    """Two distinct shapes at pp = 1 (zb-h1 priced apart by the DES) never print the same label."""
    from simcluster.sweep.report import shape_labels

    rows = [_row(schedule="1f1b"), _row(schedule="zb-h1", step=10.1), _row(step=12.0, mem=30.0)]
    assert shape_labels(rows, [0, 1]) == ["tp1 pp1 dp8 mb1 1f1b none z1",
                                          "tp1 pp1 dp8 mb1 zb-h1 none z1"]
    assert shape_labels(rows, [0]) == ["tp1 pp1 dp8 mb1 none z1"]


def test_best_per_parallel_shape_oracle() -> None:
    """One row per (option, tp, pp, cp, ep), the best-ranked, in rank order."""
    from simcluster.sweep.report import best_per_parallel

    rows = [_row(), _row(step=11.0), _row(pp=2), _row(option="b"), _row(pp=2, step=12.0)]
    assert best_per_parallel(rows, [0, 1, 2, 3, 4], top=10) == [0, 2, 3]
    assert best_per_parallel(rows, [4, 1, 0, 2, 3], top=2) == [4, 1]


def test_identical_rows_collapse_and_list_their_variants_oracle() -> None:
    rows = [_row(schedule="gpipe"), _row(schedule="1f1b"), _row(option="b", schedule="gpipe"),
            _row(step=11.0), _row(pp=2, schedule="1f1b"), _row(pp=2, schedule="gpipe")]
    shapes = distinct_shapes(rows, list(range(6)), top=10)
    assert shapes == [(0, [1, 2]), (3, []), (4, []), (5, [])]
    assert _variants_text(rows, 0, [1, 2]) == "+2: 1f1b, b"
    assert distinct_shapes(rows, list(range(6)), top=2) == [(0, [1, 2]), (3, [])]


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([1, 2]),
                          st.sampled_from(["gpipe", "1f1b"]), st.sampled_from([1.0, 2.0])),
                min_size=1, max_size=40), st.integers(1, 10))
def test_shapes_are_distinct_and_cover_their_rows(spec: list[tuple[str, int, str, float]],
                                                  top: int) -> None:
    rows = [_row(option=o, pp=p, schedule=s, step=t) for o, p, s, t in spec]
    ranked = list(range(len(rows)))
    shapes = distinct_shapes(rows, ranked, top)
    assert len(shapes) <= top
    texts = [(shape_text(rows[i]), rows[i]["step_time_s"]) for i, _ in shapes]
    assert len(set(texts)) == len(texts)  # one row per shape
    for best, others in shapes:
        assert all(j > best for j in others)  # the best-ranked row represents its shape
        assert all((shape_text(rows[j]), rows[j]["step_time_s"]) == texts[[i for i, _ in shapes]
                   .index(best)] for j in others)


def test_a_million_settings_are_refused_before_any_is_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 24 item 5: 1,000 x 1,000 varied values are counted (options x values) and refused
    before a single setting is built (before, all of them were built first: minutes, gigabytes)."""
    from simcluster.errors import SpecError
    from simcluster.sweep import config

    values = list(range(1, 1001))
    with monkeypatch.context() as patched:
        patched.setattr(config, "_product", lambda axes: pytest.fail("settings were built"))
        with pytest.raises(SpecError, match=r"1,000,000 settings"):
            config.settings_from(None, {"checkpoint.interval_min": values,
                                        "training.tokens": values}, "f.yaml")
    assert len(config.settings_from(None, {"training.tokens": values[:10]}, "f.yaml")) == 10
    assert config.MAX_SETTINGS == 10_000
