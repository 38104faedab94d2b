"""benchmarks/mutation_by_coverage.py (issue 24 item 10): mutant names to the function they mutate,
coverage contexts to pytest node ids, and pytest's exit status to a verdict."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts import import_script

SOURCE = '''
def f(x):
    y = x + 1
    return y


class C:
    def m(self):
        return 2
'''


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return import_script("benchmarks", "mutation_by_coverage")


def test_a_mutant_name_names_its_module_and_function(bench: ModuleType) -> None:
    assert bench.target("simcluster.perf.flops.x_hardware_flops__mutmut_5") == (
        Path("simcluster/perf/flops.py"), None, "hardware_flops")
    assert bench.target("simcluster.sim.network.xǁNetworkǁ_connected__mutmut_9") == (
        Path("simcluster/sim/network.py"), "Network", "_connected")
    assert bench.target("simcluster.cli.x__write_trace__mutmut_14") == (
        Path("simcluster/cli.py"), None, "_write_trace")


def test_the_body_lines_leave_out_the_def(bench: ModuleType) -> None:
    assert bench.body_lines(SOURCE, None, "f") == range(3, 5)
    assert bench.body_lines(SOURCE, "C", "m") == range(9, 10)


def test_contexts_become_node_ids(bench: ModuleType) -> None:
    assert bench.context_to_nodeid("test_cli_reference.test_every_subcommand_has_a_section") == (
        "tests/unit/test_cli_reference.py::test_every_subcommand_has_a_section")
    assert bench.context_to_nodeid("tests.validation.test_mpt.test_x") == (
        "tests/validation/test_mpt.py::test_x")
    with pytest.raises(ValueError, match="no test file"):
        bench.context_to_nodeid("nowhere.test_x")


def test_a_listed_file_covers_its_own_tests_and_units_run_first(bench: ModuleType) -> None:
    ids = {"tests/unit/a.py", "tests/unit/a.py::t", "tests/validation/v.py::t", "tests/unit/b.py::t"}
    assert bench._drop_covered(ids) == ids - {"tests/unit/a.py::t"}
    ordered = sorted(bench._drop_covered(ids), key=bench._speed_order)
    assert ordered[-1] == "tests/validation/v.py::t"


def test_exit_statuses(bench: ModuleType) -> None:
    """pytest: 0 passed (the mutant survived), 1 a test failed, 2 and 4 a test module no longer
    imports (collection error): both killed; 5 (nothing selected) is left to the caller."""
    assert bench.STATUS == {0: "survived", 1: "killed", 2: "killed", 4: "killed"}
    assert bench.run_one("x", [], 1.0) == "no tests"
