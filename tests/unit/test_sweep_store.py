"""``simcluster.sweep.store.ResultStore`` and the row typing of ``simcluster.sweep.rows``."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from simcluster.errors import InvariantError, SpecError
from simcluster.sweep.rows import Row, column_names, normalize_rows
from simcluster.sweep.runner import Chunk, run_chunks
from simcluster.sweep.store import ResultStore
from tests.sweep_tasks import SquareTask, chunks_of


def _typed(rows: list[Row]) -> list[list[tuple[str, type, Any]]]:
    return [[(k, type(v), v) for k, v in row.items()] for row in rows]


def _csv(path: Path) -> list[str]:
    return path.read_text().splitlines()


# --- the directory and its key ---------------------------------------------------------------


def test_the_constructor_creates_nothing_and_the_first_save_writes_the_manifest(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "out", "abc123")
    assert not (tmp_path / "out").exists()
    assert store.done() == set()
    store.save(7, [{"a": 1}])
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest == {"format": "simcluster/sweep-results", "version": 1, "key": "abc123"}
    assert store.done() == {7}
    assert (tmp_path / "out" / "parts" / "chunk-000007.parquet").is_file()


def test_a_directory_of_another_sweep_is_refused_naming_it(tmp_path: Path) -> None:
    ResultStore(tmp_path / "out", "one").save(0, [{"a": 1}])
    with pytest.raises(SpecError, match="holds the results of another sweep") as err:
        ResultStore(tmp_path / "out", "two")
    assert err.value.key == "--out"
    assert str(tmp_path / "out") in err.value.message
    assert "another --out" in err.value.message
    assert "delete it" in err.value.message
    assert ResultStore(tmp_path / "out", "one").done() == {0}  # the same key resumes


def test_a_non_empty_directory_without_manifest_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SpecError, match=r"manifest\.json is missing") as err:
        ResultStore(tmp_path, "k")
    assert err.value.key == "--out"
    ResultStore(tmp_path / "empty", "k")  # new is fine
    (tmp_path / "empty2").mkdir()
    ResultStore(tmp_path / "empty2", "k")  # empty is fine


def test_a_manifest_of_another_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text('{"format": "other", "version": 1, "key": "k"}')
    with pytest.raises(SpecError, match="another format"):
        ResultStore(tmp_path, "k")
    (tmp_path / "manifest.json").write_text("[1, 2")
    with pytest.raises(SpecError, match="cannot be read"):
        ResultStore(tmp_path, "k")


def test_a_torn_temporary_part_is_ignored_and_its_chunk_recomputed(tmp_path: Path) -> None:
    out, calls = tmp_path / "out", tmp_path / "calls"
    calls.mkdir()
    chunks = chunks_of(5)
    run_chunks(SquareTask(), chunks[:3], store=ResultStore(out, "k"))
    torn = out / "parts" / ".tmp-4242-chunk-000003.parquet"  # a write killed half-way
    torn.write_bytes(b"PAR1\x00\x01 half a parquet file")
    store = ResultStore(out, "k")
    assert store.done() == {0, 1, 2}
    rows = run_chunks(SquareTask(calls_dir=str(calls)), chunks, store=store)
    assert sorted(p.name.split("-")[1] for p in calls.iterdir()) == ["3", "4"]
    assert not torn.exists()
    assert rows == run_chunks(SquareTask(), chunks)


def test_an_unreadable_part_is_a_spec_error_saying_what_to_delete(tmp_path: Path) -> None:
    store = ResultStore(tmp_path, "k")
    store.save(0, [{"a": 1}])
    store.part_path(0).write_bytes(b"not parquet")
    with pytest.raises(SpecError, match=r"chunk-000000\.parquet cannot be read.*delete it"):
        store.load(0)


# --- the final tables ------------------------------------------------------------------------


def test_finish_writes_parquet_and_csv_with_stable_column_types(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "out", "k")
    rows = run_chunks(SquareTask(), chunks_of(2), store=store)
    parquet, csv = store.finish(rows, "csv")
    schema = pq.read_schema(parquet)
    assert [(f.name, str(f.type)) for f in schema] == [
        ("point", "int64"), ("square", "int64"), ("name", "string"), ("odd", "bool"),
        ("maybe", "double"), ("never", "null"), ("mixed", "double")]
    assert _csv(csv)[:3] == ['"point","square","name","odd","maybe","never","mixed"',
                             '0,0,"p0",false,0,,0.5', '1,1,"p1",true,,,1']
    assert pq.read_table(parquet).to_pylist() == rows
    assert not list((tmp_path / "out").glob(".tmp-*"))


def test_parquet_alone_by_default_and_gzip_csv_on_request(tmp_path: Path) -> None:
    store = ResultStore(tmp_path, "k")
    rows = [{"x": 1, "y": "a"}, {"x": 2, "y": None}]
    assert store.finish(rows, "csv") == (tmp_path / "results.parquet", tmp_path / "results.csv")
    plain = (tmp_path / "results.csv").read_bytes()
    packed = store.finish(rows, "csv.gz")
    assert packed == (tmp_path / "results.parquet", tmp_path / "results.csv.gz")
    assert not (tmp_path / "results.csv").exists()  # the stale plain CSV is gone
    assert gzip.decompress(packed[1].read_bytes()) == plain
    assert store.finish(rows, "csv.gz")[1].read_bytes() == packed[1].read_bytes()  # no timestamp
    assert store.finish(rows) == (tmp_path / "results.parquet",)
    assert sorted(p.name for p in tmp_path.glob("results*")) == ["results.parquet"]
    with pytest.raises(ValueError, match="results must be one of"):
        store.finish(rows, "xlsx")


def test_an_int_column_in_one_chunk_and_float_in_another_is_float(tmp_path: Path) -> None:
    store = ResultStore(tmp_path, "k")
    store.save(0, [{"x": 1}, {"x": 2}])
    store.save(1, [{"x": 0.5}])
    assert pq.read_schema(store.part_path(0)).field("x").type == pa.int64()
    rows = store.load(0) + store.load(1)
    parquet, csv = store.finish(rows, "csv")
    assert pq.read_schema(parquet).field("x").type == pa.float64()
    assert _csv(csv) == ['"x"', "1", "2", "0.5"]


def test_bools_stay_bools_and_an_all_none_column_is_a_null_column(tmp_path: Path) -> None:
    parquet, csv = ResultStore(tmp_path, "k").finish([{"b": True, "n": None}, {"b": None, "n": None}],
                                                     "csv")
    table = pq.read_table(parquet)
    assert table.schema.field("b").type == pa.bool_()
    assert table.schema.field("n").type == pa.null()
    assert _csv(csv) == ['"b","n"', "true,", ","]


def test_columns_keep_first_row_order_then_new_keys_in_order_of_appearance(tmp_path: Path) -> None:
    rows: list[Row] = [{"b": 1, "a": 2}, {"a": 3, "c": "x"}, {"d": False, "b": 4}]
    assert column_names(rows) == ["b", "a", "c", "d"]
    parquet, csv = ResultStore(tmp_path, "k").finish(rows, "csv")
    assert pq.read_schema(parquet).names == ["b", "a", "c", "d"]
    assert _csv(csv) == ['"b","a","c","d"', "1,2,,", ',3,"x",', "4,,,false"]


def test_a_chunk_without_rows_is_stored_and_done(tmp_path: Path) -> None:
    store = ResultStore(tmp_path, "k")
    store.save(3, [])
    assert store.done() == {3}
    assert store.load(3) == []


@pytest.mark.parametrize(("rows", "held"), [
    ([{"x": True}, {"x": 2.5}], "bool, float"),
    ([{"x": "a"}, {"x": 1}], "int, str"),
    ([{"x": np.float64(1.0)}], "float64"),
])
def test_columns_of_mixed_kinds_are_invariant_errors(tmp_path: Path, rows: list[Row], held: str) -> None:
    with pytest.raises(InvariantError, match=f"column 'x' holds {held}"):
        ResultStore(tmp_path, "k").save(0, rows)
    with pytest.raises(InvariantError, match=f"column 'x' holds {held}"):
        normalize_rows(rows)


def test_a_task_returning_no_list_of_dicts_is_an_invariant_error() -> None:
    with pytest.raises(InvariantError, match="list of dict rows"):
        normalize_rows((1, 2))  # type: ignore[arg-type]


def test_rows_without_any_column_are_an_invariant_error(tmp_path: Path) -> None:
    """A table without columns cannot keep a row count: such rows would vanish on resume."""
    with pytest.raises(InvariantError, match="2 rows without any column"):
        normalize_rows([{}, {}])
    with pytest.raises(InvariantError, match="1 rows without any column"):
        ResultStore(tmp_path, "k").save(0, [{}])
    assert normalize_rows([{}, {"a": 1}]) == [{"a": None}, {"a": 1}]


# --- round trip ------------------------------------------------------------------------------

VALUES = {
    "i": st.integers(-(2**63), 2**63 - 1),
    "f": st.floats(allow_nan=False) | st.integers(-(2**53), 2**53),
    "s": st.text(max_size=5),
    "b": st.booleans(),
}


@st.composite
def chunk_rows(draw: st.DrawFn) -> list[Row]:
    """Rows whose columns each hold one kind (ints mixed into floats), with missing keys and Nones."""
    kinds = draw(st.dictionaries(st.sampled_from(["c0", "c1", "c2", "c3", "c4"]),
                                 st.sampled_from(sorted(VALUES)), min_size=1))
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        present = draw(st.lists(st.sampled_from(sorted(kinds)), unique=True))
        rows.append({k: draw(st.none() | VALUES[kinds[k]]) for k in present})
    if rows and not any(rows):  # no column at all: refused (test above)
        rows[0][next(iter(kinds))] = None
    return rows


@given(chunk_rows())
def test_a_stored_chunk_reads_back_as_the_normalised_rows(tmp_path_factory: pytest.TempPathFactory,
                                                           rows: list[Row]) -> None:
    store = ResultStore(tmp_path_factory.mktemp("store"), "k")
    store.save(0, copy.deepcopy(rows))
    assert _typed(store.load(0)) == _typed(normalize_rows(copy.deepcopy(rows)))


def test_run_chunks_accepts_a_task_whose_rows_miss_keys() -> None:
    def task(chunk: Chunk) -> list[Row]:
        return [{"a": 1}, {"b": 2}]

    assert run_chunks(task, [Chunk(0, (0,))]) == [{"a": 1, "b": None}, {"a": None, "b": 2}]
