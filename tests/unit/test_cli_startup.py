"""Command-line start-up: ``import simcluster.cli`` loads no engine, ``--version``, lazy exports.

Behaviour tests, not timed ones (the timings are in benchmarks/): the heavy packages (numpy,
networkx, SimPy, matplotlib) must be imported by the handler that needs them, not at start-up.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import simcluster
from simcluster import catalog
from simcluster.cli import CATALOG_KINDS, main

HEAVY = ("numpy", "networkx", "simpy", "matplotlib")
ROOT = Path(__file__).resolve().parents[2]


def _loaded_after(statement: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """``heavy`` packages in ``sys.modules`` after running ``statement`` in a fresh interpreter."""
    code = f"import json, sys\n{statement}\nprint(json.dumps([m for m in {heavy!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          cwd=ROOT)
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_importing_the_cli_loads_no_heavy_package() -> None:
    assert _loaded_after("import simcluster.cli") == []


def test_help_and_version_load_no_heavy_package() -> None:
    statement = ("from simcluster.cli import build_parser\n"
                 "build_parser().format_help()\n"
                 "from simcluster.cli import version\nversion()")
    assert _loaded_after(statement) == []


def test_run_fast_loads_no_flow_engine() -> None:
    statement = ("import contextlib, io\nfrom simcluster.cli import main\n"
                 "with contextlib.redirect_stdout(io.StringIO()):\n"
                 "    assert main(['run', 'scenarios/default.yaml', '--fast']) == 0")
    assert _loaded_after(statement, ("networkx", "matplotlib")) == []


def test_package_exports_load_lazily() -> None:
    assert _loaded_after("import simcluster") == []
    assert "load_scenario" in dir(simcluster)
    assert simcluster.SpecError.__name__ == "SpecError"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        simcluster.nope  # noqa: B018


def test_version_prints_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"simcluster {metadata.version('simcluster')}\n"


def test_catalog_kinds_match_the_catalog() -> None:
    assert CATALOG_KINDS == catalog.KINDS


def test_lazy_exports_resolve_once_and_refuse_unknown_names() -> None:
    import simcluster
    import simcluster.sim as sim
    from simcluster.sim.step import simulate_step
    from simcluster.spec import load_scenario

    assert simcluster.load_scenario is load_scenario
    assert sim.simulate_step is simulate_step
    assert "simulate_step" in vars(sim)  # stored after the first access
    assert {"load_scenario", "Scenario"} <= set(dir(simcluster))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = sim.nope
