"""The fuzz test's mutation helpers (tests/property/fuzz_strategies.py)."""

from __future__ import annotations

from tests.property.fuzz_strategies import set_path


def test_set_path_through_a_list_with_a_string_key_is_a_no_op() -> None:
    """An earlier mutation may turn ``cluster`` into a list; adding ``cluster.topology.x`` then
    crashed example generation (int('topology'))."""
    doc: dict[str, object] = {"cluster": [1, 2]}
    set_path(doc, ("cluster", "topology", "x"), 1)
    assert doc == {"cluster": [1, 2]}


def test_set_path_through_a_list_by_index_still_sets() -> None:
    doc: dict[str, object] = {"a": [{"b": 1}]}
    set_path(doc, ("a", 0, "b"), 5)
    assert doc == {"a": [{"b": 5}]}
