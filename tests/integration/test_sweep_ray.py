"""``run_chunks(backend="ray")`` against a local Ray: the same rows and tables as the local backend.

Each test starts a local Ray of 2 CPUs (about 5 s here), hence ``slow`` (slow tests still run in CI).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simcluster.errors import SpecError
from simcluster.sweep.runner import run_chunks
from simcluster.sweep.store import ResultStore
from tests.sweep_tasks import FailingTask, SquareTask, chunks_of

ray = pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _workers_import_the_tests(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Ray workers inherit the environment: let them import ``tests.sweep_tasks``."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    yield
    if ray.is_initialized():  # a failed test must not leave its Ray to the next one
        ray.shutdown()


def test_ray_gives_the_local_rows_and_tables_and_shuts_down_the_ray_it_started(tmp_path: Path) -> None:
    chunks = chunks_of(12)
    local_store = ResultStore(tmp_path / "local", "k")
    local = run_chunks(SquareTask(extra_column_from=5), chunks, jobs=2, store=local_store)
    ray_store = ResultStore(tmp_path / "ray", "k")
    on_ray = run_chunks(SquareTask(extra_column_from=5), chunks, backend="ray", jobs=2, store=ray_store)
    assert not ray.is_initialized()
    assert [[(k, type(v), v) for k, v in r.items()] for r in on_ray] == [
        [(k, type(v), v) for k, v in r.items()] for r in local]
    assert ray_store.done() == set(range(12))
    local_store.finish(local, "csv")
    ray_store.finish(on_ray, "csv")
    csv = (tmp_path / "ray" / "results.csv").read_bytes()
    assert csv == (tmp_path / "local" / "results.csv").read_bytes()


def test_on_a_running_ray_errors_arrive_intact_and_that_ray_is_left_running() -> None:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with pytest.raises(SpecError) as err:
        run_chunks(FailingTask(bad=4), chunks_of(8), backend="ray", jobs=2)
    assert (err.value.key, err.value.message, err.value.source) == (
        "parallelism.tp", "chunk 4 is bad", "scenario.yaml")
    assert ray.is_initialized()
    on_ray = run_chunks(SquareTask(), chunks_of(3), backend="ray", jobs=2)
    assert on_ray == run_chunks(SquareTask(), chunks_of(3))
    assert ray.is_initialized()
    ray.shutdown()
