"""report.table.format_table: the terminal tables' layout as its docstring states it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from simcluster.report.table import format_table


def test_first_column_left_others_right_by_hand() -> None:
    text = format_table(["name", "GiB"], [["a", 1.5], ["long name", None], ["b", 12345678.0]])
    lines = text.splitlines()
    assert lines[0] == "name             GiB"
    assert lines[1] == "---------  ---------"
    assert lines[2] == "a                1.5"
    assert lines[3] == "long name          -"
    assert lines[4] == "b          1.235e+07"


def test_a_wrapped_column_is_left_aligned_over_several_lines() -> None:
    text = format_table(["k", "note", "n"], [["x", "one two three", 7]], wrap={1: 7})
    assert text.splitlines() == ["k  note     n", "-  -------  -", "x  one two  7", "   three"]


@given(st.lists(st.tuples(st.text("abc ", min_size=1, max_size=6), st.integers(-999, 999)),
                min_size=1, max_size=6))
def test_columns_are_as_wide_as_their_widest_cell(rows: list[tuple[str, int]]) -> None:
    """Every line but the rule starts with the first cell padded to the first column's width."""
    text = format_table(["key", "value"], rows)
    lines = text.splitlines()
    width = max(len("key"), *(len(k) for k, _ in rows))
    assert lines[1] == "-" * width + "  " + "-" * max(len("value"), *(len(str(v)) for _, v in rows))
    for (key, value), line in zip(rows, lines[2:], strict=True):
        assert line.startswith(key.ljust(width) + "  ")
        assert line.endswith(str(value))
