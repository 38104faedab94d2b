"""Mutation score of ``simcluster/perf`` and ``simcluster/horizon`` with mutmut 3 (issue 15).

Not a speed benchmark of the simulator: it measures how much of the formula code the fast tests
actually check. mutmut copies the package to ``mutants/``, makes one-token changes inside every
function of the modules named by ``[tool.mutmut] only_mutate`` in ``pyproject.toml`` and runs, for
each mutant, the tests (of ``pytest_add_cli_args_test_selection``) that reached that function.

Usage (from the repository root, with ``pip install -e '.[dev,mutation]'``)::

    python benchmarks/bench_mutation.py --run [--max-children 2] [PATTERN ...]
    python benchmarks/bench_mutation.py [--survivors 40] [PATTERN ...]

``--run`` runs ``mutmut run --max-children N PATTERN ...`` (``CI=true``: the derandomised
hypothesis profile of ``tests/conftest.py``, so a property test cannot kill by chance) and times
it; without it the script only reads the results already in ``mutants/``. PATTERNs are mutmut's
mutant-name globs, e.g. ``'simcluster.perf.flops.*'``; none means every mutant. mutmut resumes
where it stopped, so a second ``--run`` only tests what is left.

It prints, per module: mutants generated, checked, killed, survived, timeout, no tests, skipped,
and the score killed / (checked - skipped), where "checked" excludes mutants not run yet; a
timeout is not counted as killed. The results are kept in ``benchmarks/README.md``. Nothing here
runs under pytest or ``.ci/run``; ``mutants/`` is ignored by git.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simcluster.report.table import format_table  # noqa: E402

MUTANTS = ROOT / "mutants"
SCOPE = ("simcluster",)  # every module ``[tool.mutmut] only_mutate`` names
#: The random sample (issue 24 item 10): its names, one per line, kept so a later run tests the same.
SAMPLE_FILE = ROOT / "benchmarks" / "mutation_sample.txt"
DEFAULT_SAMPLE, DEFAULT_SEED = 300, 24
#: Each package's share of the sample is proportional to its mutants, at least this many.
MIN_PER_PACKAGE = 20
#: The packages the sample draws from (issue 24 item 10); the layer-0 helpers (units, errors, rng,
#: yamlio, lazy), catalog, observe and run are left to the full runs.
PACKAGES = ("sim", "perf", "horizon", "sweep", "spec", "topology", "flows", "report", "cli")

#: mutmut 3's exit-code meaning (``mutmut/stats.py``, ``status_by_exit_code``); others: "suspicious".
STATUS_BY_EXIT = {
    1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 2: "interrupted",
    34: "skipped", 35: "suspicious", 36: "timeout", 37: "type check", -24: "timeout", 24: "timeout",
    152: "timeout", 255: "timeout", -11: "segfault", -9: "segfault",
}
COLUMNS = ("killed", "survived", "timeout", "no tests", "skipped", "other")


def status_of(exit_code: int | None) -> str:
    """mutmut's status of one mutant from the exit code it stored (None: not run yet)."""
    if exit_code is None:
        return "not checked"
    return STATUS_BY_EXIT.get(exit_code, "suspicious")


def load_statuses(patterns: Sequence[str] = ()) -> dict[str, dict[str, str]]:
    """``{module path: {mutant name: status}}`` from mutmut's ``mutants/**/*.py.meta`` files,
    restricted to mutant names matching one of ``patterns`` (all when empty)."""
    result: dict[str, dict[str, str]] = {}
    for scope in SCOPE:
        for meta in sorted((MUTANTS / scope).rglob("*.py.meta")):
            codes: dict[str, int | None] = json.loads(meta.read_text())["exit_code_by_key"]
            chosen = {k: status_of(v) for k, v in codes.items()
                      if not patterns or any(fnmatch(k, p) for p in patterns)}
            if chosen:
                module = str(meta.relative_to(MUTANTS)).removesuffix(".meta")
                result[module] = chosen
    return result


def tally(statuses: dict[str, str]) -> dict[str, int]:
    """Counts per column of ``COLUMNS`` plus ``mutants`` (generated) and ``checked``."""
    counts = Counter(statuses.values())
    row = {c: counts.get(c, 0) for c in COLUMNS[:-1]}
    checked = len(statuses) - counts.get("not checked", 0)
    row["other"] = checked - sum(row.values())
    row["mutants"], row["checked"] = len(statuses), checked
    return row


def score(row: dict[str, int]) -> float | None:
    """killed / (checked - skipped); None when nothing was checked."""
    tested = row["checked"] - row["skipped"]
    return row["killed"] / tested if tested else None


def table(by_module: dict[str, dict[str, str]]) -> str:
    """The per-module table with a total line, as plain text."""
    headers = ("module", "mutants", "checked", *COLUMNS, "score")
    rows: list[list[object]] = []
    total = dict.fromkeys(("mutants", "checked", *COLUMNS), 0)
    for module, statuses in by_module.items():
        row = tally(statuses)
        total = {k: total[k] + row[k] for k in total}
        rows.append(_row(module.removeprefix("simcluster/"), row))
    rows.append(_row("total", total))
    return format_table(headers, rows)


def _row(name: str, row: dict[str, int]) -> list[object]:
    value = score(row)
    shown = "-" if value is None else f"{100 * value:.1f}%"
    return [name, row["mutants"], row["checked"], *(row[c] for c in COLUMNS), shown]


def worst_case_minutes(by_module: dict[str, dict[str, str]]) -> tuple[float, float]:
    """Serial test time (min) that mutmut's per-mutant test selection costs if every mutant
    survives (every covering test runs; a kill stops at the first failure): for all mutants, and
    for those not checked yet. From ``mutants/mutmut-stats.json`` (per-test durations, measured
    under mutmut's tracing, and which tests reach each function)."""
    stats = json.loads((MUTANTS / "mutmut-stats.json").read_text())
    tests, duration = stats["tests_by_mangled_function_name"], stats["duration_by_test"]
    every = left = 0.0
    for statuses in by_module.values():
        for name, status in statuses.items():
            cost = sum(duration[t] for t in tests.get(name.rsplit("__mutmut_", 1)[0], ()))
            every += cost
            left += cost if status == "not checked" else 0.0
    return every / 60, left / 60


def survivors(by_module: dict[str, dict[str, str]]) -> list[str]:
    """Names of the surviving and untested mutants, by module."""
    return [name for statuses in by_module.values() for name, status in statuses.items()
            if status in ("survived", "no tests")]


def _checked(by_module: dict[str, dict[str, str]]) -> int:
    return sum(tally(statuses)["checked"] for statuses in by_module.values())


def _unchecked(by_module: dict[str, dict[str, str]]) -> int:
    return sum(tally(statuses)["mutants"] for statuses in by_module.values()) - _checked(by_module)


def package_of(name: str) -> str:
    """``simcluster.perf.flops.x_f__mutmut_3`` -> ``perf``; top-level modules (``cli_sweep``,
    ``units``) -> ``cli`` for the ``cli*`` modules, else the module's name."""
    parts = name.split(".")
    top = parts[1] if len(parts) > 2 else parts[-1]
    return "cli" if top.startswith("cli") else top


def draw_sample(names: Sequence[str], size: int, seed: int) -> list[str]:
    """A random sample of ``size`` mutant names of :data:`PACKAGES`, stratified by package: each
    package first gets ``MIN_PER_PACKAGE`` (all of its mutants if fewer), then one more at a time
    goes to the package furthest below its proportional share ``size x n_p / n`` that has mutants
    left, until ``size`` are drawn (or none is left). ``numpy.random.default_rng(seed)``: the same
    names give the same sample."""
    import numpy as np

    rng = np.random.default_rng(seed)
    by_package: dict[str, list[str]] = {}
    for name in sorted(names):
        if package_of(name) in PACKAGES:
            by_package.setdefault(package_of(name), []).append(name)
    total = sum(len(v) for v in by_package.values())
    share = {p: min(len(v), MIN_PER_PACKAGE) for p, v in by_package.items()}
    while sum(share.values()) < size:
        room = [p for p, v in by_package.items() if share[p] < len(v)]
        if not room:
            break
        neediest = max(room, key=lambda p: size * len(by_package[p]) / total - share[p])
        share[neediest] += 1
    chosen = [str(n) for p, v in by_package.items()
              for n in rng.choice(v, size=share[p], replace=False)]
    return sorted(chosen)


def all_mutants() -> list[str]:
    """Every mutant name mutmut generated (its ``mutants/**/*.py.meta`` files)."""
    return [k for meta in sorted((MUTANTS / "simcluster").rglob("*.py.meta"))
            for k in json.loads(meta.read_text())["exit_code_by_key"]]


def package_table(by_module: dict[str, dict[str, str]]) -> str:
    """Kill rate per package (the sample's table)."""
    merged: dict[str, dict[str, str]] = {}
    for statuses in by_module.values():
        for name, status in statuses.items():
            merged.setdefault(package_of(name), {})[name] = status
    return table(dict(sorted(merged.items())))


def run_mutmut(patterns: Sequence[str], max_children: int) -> tuple[int, float]:
    """Run ``mutmut run`` in the repository root; its exit status and wall time (s)."""
    argv = [str(Path(sys.executable).with_name("mutmut")), "run", "--max-children", str(max_children),
            *patterns]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env={**os.environ, "CI": "true"}, check=False)
    return done.returncode, time.perf_counter() - start


def main() -> None:
    """Optionally run mutmut, then print the per-module counts and score (and survivors)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("patterns", nargs="*", help="mutant-name globs, e.g. 'simcluster.perf.flops.*'")
    parser.add_argument("--run", action="store_true", help="run mutmut first (resumes where it stopped)")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutant workers")
    parser.add_argument("--survivors", type=int, default=0, help="also list this many survivors")
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help=f"draw N mutants (300 for issue 24) stratified by package, write "
                             f"their names to {SAMPLE_FILE.name} and use them as the patterns")
    parser.add_argument("--sampled", action="store_true",
                        help=f"use the names in {SAMPLE_FILE.name} as the patterns")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of --sample")
    parser.add_argument("--by-package", action="store_true",
                        help="the table per package (the sample's), not per module")
    args = parser.parse_args()
    if args.sample:
        names = all_mutants()
        if not names:
            sys.exit("no mutants generated yet: run `python benchmarks/bench_mutation.py --run "
                     "'nothing.*'` first (generates every mutant and collects test coverage)")
        sample = draw_sample(names, args.sample, args.seed)
        SAMPLE_FILE.write_text("\n".join(sample) + "\n", encoding="utf-8")
        print(f"{len(sample)} of {len(names)} mutants drawn (seed {args.seed}) -> {SAMPLE_FILE}")
        args.patterns = sample
    elif args.sampled:
        args.patterns = SAMPLE_FILE.read_text(encoding="utf-8").split()
    before = _checked(load_statuses(args.patterns)) if MUTANTS.exists() else 0
    if args.run:
        status, wall = run_mutmut(args.patterns, args.max_children)
        new = _checked(load_statuses(args.patterns)) - before
        print(f"mutmut run: exit {status}, wall {wall:.0f} s ({wall / 60:.1f} min), {new} mutants"
              f" checked in this run: {60 * new / wall:.1f} per minute")
    by_module = load_statuses(args.patterns)
    if not by_module:
        sys.exit("no mutmut results in mutants/: run with --run first")
    print(package_table(by_module) if args.by_package else table(by_module))
    if (MUTANTS / "mutmut-stats.json").exists():
        every, left = worst_case_minutes(by_module)
        print(f"worst case (every mutant survives), serial test time: {every:.0f} min in all,"
              f" {left:.0f} min for the {_unchecked(by_module)} mutants not checked yet")
    names = survivors(by_module)
    if args.survivors:
        print(f"\n{len(names)} surviving or untested mutants; the first {args.survivors}"
              " (`mutmut show NAME` prints the diff):")
        print("\n".join(names[: args.survivors]))


if __name__ == "__main__":
    main()
