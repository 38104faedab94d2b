"""Check mutmut's mutants against the tests that cover them, found by line coverage (issue 24 item 10).

``mutmut run`` first collects, per test, which functions it reaches (its trampolines record every
call: 40 min on this machine), then runs the clean suite (16 min) before the first mutant. This
script reaches the same per-mutant verdicts with a map that costs one ``coverage run`` of the suite
(``dynamic_context = test_function``: each covered line knows the test functions that ran it):

1. ``--generate``: mutmut 3 writes every mutant to ``mutants/`` (its own generator; nothing runs);
2. ``--map COVERAGE_FILE``: a ``.coverage`` data file of the suite with test-function contexts
   (``coverage run --rcfile=RC -m pytest -n 0 ...``: in-process, not on the two xdist workers of
   pyproject's ``addopts``; RC sets ``source = simcluster`` and
   ``dynamic_context = test_function``) gives, per mutant, the test functions that ran a line of
   the mutated function's body;
3. each mutant runs those tests (``pytest -x`` in ``mutants/`` with ``MUTANT_UNDER_TEST`` set,
   ``CI=true``: the derandomised hypothesis profile): exit 1 (a test failed) or 2 and 4 (a test
   module no longer imports) is *killed*, 0 *survived*, no covering test *no tests*, past
   ``--timeout`` *timeout* (not counted as killed).

The verdicts go to ``benchmarks/mutation_results.json`` (name -> status, kept in git so the next
session knows the survivors); ``--names FILE`` picks the mutants (default: the issue 24 sample in
``mutation_sample.txt``); ``--only STATUS`` re-checks just those with that stored status. The table
is ``bench_mutation.py``'s, per package. Nothing here runs under pytest or ``.ci/run``.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_mutation import SAMPLE_FILE, package_table  # noqa: E402

MUTANTS = ROOT / "mutants"
RESULTS = ROOT / "benchmarks" / "mutation_results.json"
#: Separator mutmut puts between a class and its method in a mutant's name.
CLASS_SEP = "ǁ"


def generate() -> None:
    """Write every mutant of ``[tool.mutmut] only_mutate`` to ``mutants/`` (mutmut's generator)."""
    mm: Any = importlib.import_module("mutmut.__main__")  # its helpers are not exported
    os.chdir(ROOT)
    mm.set_mutant_under_test("mutant_generation")
    MUTANTS.mkdir(exist_ok=True)
    mm.copy_src_dir()
    mm.copy_also_copy_files()
    mm.setup_source_paths()
    print(mm.create_mutants(os.cpu_count() or 1))


def target(name: str) -> tuple[Path, str | None, str]:
    """``simcluster.perf.flops.x_f__mutmut_3`` -> (``simcluster/perf/flops.py``, None, ``f``);
    a method ``xǁCǁm__mutmut_2`` -> (path, ``C``, ``m``)."""
    module, _, mangled = name.rpartition(".")
    function = mangled.rsplit("__mutmut_", 1)[0]
    path = Path(*module.split(".")).with_suffix(".py")
    if function.startswith("x" + CLASS_SEP):
        _, cls, method = function.split(CLASS_SEP)
        return path, cls, method
    return path, None, function.removeprefix("x_")


def body_lines(source: str, cls: str | None, function: str) -> range:
    """Lines of the body of ``function`` (a method of ``cls`` when given) in ``source``."""
    scope: Iterable[ast.stmt] = ast.parse(source).body
    if cls is not None:
        owner = next(n for n in scope if isinstance(n, ast.ClassDef) and n.name == cls)
        scope = owner.body
    node = next(n for n in scope
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function)
    assert node.end_lineno is not None
    return range(node.body[0].lineno, node.end_lineno + 1)


#: The context coverage gives every line a hypothesis ``@given`` test runs (not the test's name).
HYPOTHESIS_CONTEXT = "hypothesis."


def context_to_nodeid(context: str) -> str:
    """coverage's ``test_x.test_f`` (a test directory without ``__init__``), ``tests.unit.test_x
    .test_f`` or ``test_x.TestC.test_f`` -> the pytest node id ``tests/unit/test_x.py::test_f``
    (``::TestC::test_f``)."""
    parts = context.split(".")
    for i in range(len(parts), 0, -1):
        path = ROOT / Path(*parts[:i]).with_suffix(".py")
        if path.exists():
            return "::".join([str(path.relative_to(ROOT)), *parts[i:]])
        found = sorted((ROOT / "tests").rglob(f"{parts[i - 1]}.py")) if i == 1 else []
        if len(found) == 1:
            return "::".join([str(found[0].relative_to(ROOT)), *parts[1:]])
    raise ValueError(f"no test file for coverage context {context!r}")


def naming_files(path: Path, function: str, given_only: bool) -> set[str]:
    """Test files (with ``@given`` when ``given_only``) that name the mutated module or function.
    Coverage cannot tell which hypothesis test ran a line, nor which test a line ran for when it
    ran while the tests were being collected (a catalog read at import): such a mutant runs these
    files whole."""
    module = ".".join(path.with_suffix("").parts)
    words = (module, f"import {path.stem}", f"{function}(")
    return {name for name, text in _test_texts()
            if (not given_only or "@given" in text) and any(w in text for w in words)}


@functools.cache
def _test_texts() -> tuple[tuple[str, str], ...]:
    """Every test file (path from the root, text), read once per run."""
    return tuple((str(f.relative_to(ROOT)), f.read_text(encoding="utf-8"))
                 for f in sorted((ROOT / "tests").rglob("test_*.py")))


def covering_tests(data: Sequence[object], names: Sequence[str]) -> dict[str, list[str]]:
    """Per mutant, the node ids of the tests (of any of the coverage ``data``) that ran a line of
    its function's body: unit and property tests first (they fail fastest), validation last."""
    out: dict[str, list[str]] = {}
    for name in names:
        path, cls, function = target(name)
        lines = set(body_lines((ROOT / path).read_text(encoding="utf-8"), cls, function))
        found = {c for d in data
                 for line, cs in d.contexts_by_lineno(str(ROOT / path)).items()  # type: ignore[attr-defined]
                 if line in lines for c in cs}
        ids = {context_to_nodeid(c) for c in found if c and not c.startswith(HYPOTHESIS_CONTEXT)}
        if any(c.startswith(HYPOTHESIS_CONTEXT) for c in found):
            ids |= naming_files(path, function, given_only=True)
        if not ids and "" in found:  # ran only while the tests were collected
            ids = naming_files(path, function, given_only=False)
        out[name] = sorted(_drop_covered(ids), key=_speed_order)
    return out


def _drop_covered(ids: set[str]) -> set[str]:
    """Node ids less those inside a whole file that is also listed."""
    return {i for i in ids if "::" not in i or i.split("::", 1)[0] not in ids}


#: Test directories from the fastest to the slowest (the order a mutant's tests run in).
ORDER = ("tests/unit/", "tests/property/", "tests/integration/", "tests/golden/", "tests/validation/")


def _speed_order(nodeid: str) -> tuple[int, str]:
    return next((i for i, d in enumerate(ORDER) if nodeid.startswith(d)), len(ORDER)), nodeid


def run_one(name: str, tests: Sequence[str], timeout_s: float, marker: str | None = None) -> str:
    """The verdict of one mutant: its covering tests (those of ``marker``, a pytest ``-m``
    expression, when given) run in ``mutants/`` with it switched on. With a marker, a mutant none
    of whose covering tests carry it is *survived* (its other tests ran in an earlier pass)."""
    if not tests:
        return "no tests"
    env = {**os.environ, "CI": "true", "MUTANT_UNDER_TEST": name}
    selection = ["-m", marker] if marker else []
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *selection,
            *tests]
    try:
        done = subprocess.run(argv, cwd=MUTANTS, env=env, capture_output=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired:
        return "timeout"
    if marker and done.returncode == NO_TESTS_COLLECTED:
        return "survived"
    return STATUS.get(done.returncode, f"exit {done.returncode}")


#: pytest's exit status -> verdict. 2 and 4 are a test module that no longer imports (a collection
#: error: 2 for a file, 4 for a node id in it), which the clean tree imports: the mutant broke it.
STATUS = {0: "survived", 1: "killed", 2: "killed", 4: "killed"}


#: pytest's exit status when every collected test was deselected.
NO_TESTS_COLLECTED = 5


def load_results() -> dict[str, str]:
    return json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else {}


def save_results(results: dict[str, str]) -> None:
    RESULTS.write_text(json.dumps(dict(sorted(results.items())), indent=1) + "\n", encoding="utf-8")


def check(names: Sequence[str], coverage_files: Sequence[Path], jobs: int,
          timeout_s: float, marker: str | None = None,
          given: Sequence[str] = ()) -> dict[str, str]:
    """Run every mutant of ``names`` against its covering tests (or, when ``given``, against those
    test files: a re-check of survivors against new tests); store the verdicts as they come."""
    tests = {n: list(given) for n in names} if given else covering_tests(
        _coverage(coverage_files), names)
    results = load_results()
    start = time.perf_counter()

    def one(name: str) -> None:
        results[name] = run_one(name, tests[name], timeout_s, marker)
        save_results(results)
        print(f"{time.perf_counter() - start:7.0f} s  {results[name]:9s} {name}"
              f" ({len(tests[name])} tests)", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, names))
    return results


def _coverage(paths: Sequence[Path]) -> list[object]:
    """The coverage data files at ``paths``, read."""
    from coverage import CoverageData

    data = [CoverageData(basename=str(path)) for path in paths]
    for d in data:
        d.read()
    return list(data)


def by_module(results: dict[str, str], names: Sequence[str]) -> dict[str, dict[str, str]]:
    """``{module: {name: status}}`` for ``bench_mutation.package_table`` (unchecked: not checked)."""
    table: dict[str, dict[str, str]] = {}
    for name in names:
        status = results.get(name, "not checked")
        table.setdefault(name.rpartition(".")[0], {})[name] = (
            "suspicious" if status.startswith("exit") else status)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--generate", action="store_true", help="write the mutants to mutants/ first")
    parser.add_argument("--map", type=Path, nargs="+", metavar="COVERAGE_FILE",
                        help="check the mutants against the tests these coverage files map to them")
    parser.add_argument("--names", type=Path, default=SAMPLE_FILE, help="mutant names, one a line")
    parser.add_argument("--only", metavar="STATUS",
                        help="re-check only mutants stored with STATUS ('unchecked': none stored)")
    parser.add_argument("--marker", metavar="EXPR",
                        help="run only the covering tests of this pytest -m expression: a fast "
                             "pass with 'not slow', then '--only survived --marker slow'")
    parser.add_argument("--tests", nargs="+", default=[], metavar="FILE",
                        help="run these test files on every mutant instead of a coverage map")
    parser.add_argument("--jobs", type=int, default=2, help="mutants checked at once")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per mutant")
    args = parser.parse_args()
    names = args.names.read_text(encoding="utf-8").split()
    if args.generate:
        generate()
    if args.map is not None or args.tests:
        stored = load_results()
        todo = [n for n in names if args.only is None or stored.get(n, "unchecked") == args.only]
        check(todo, args.map or [], args.jobs, args.timeout, args.marker, args.tests)
    results = load_results()
    print(package_table(by_module(results, names)))
    survivors = [n for n in names if results.get(n) in ("survived", "no tests")]
    print(f"\n{len(survivors)} surviving or untested:\n" + "\n".join(survivors))


if __name__ == "__main__":
    main()
