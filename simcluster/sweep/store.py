"""The sweep's result directory: one Parquet part per finished chunk, a manifest, the final tables.

Layout of ``--out``::

    manifest.json                 {"format": ..., "version": 1, "key": ...}, written first
    parts/chunk-000012.parquet    the rows of chunk 12, written as soon as the chunk finishes
    results.parquet               every row in chunk order, written by :meth:`ResultStore.finish`
    results.csv[.gz]              the same table as CSV (plain or gzip), only on request
                                  (``--results csv`` or ``csv.gz``); a stale one is removed

Every file is written to a temporary name in the same directory, flushed to disk and renamed over
its final name (``os.replace``), so a sweep killed at any instant (SIGKILL included) leaves only
complete parts; a leftover temporary file is ignored and its chunk recomputed. ``key`` identifies
the sweep (the caller hashes the scenario and arguments): a directory holding another sweep's
results is refused rather than mixed. The constructor only reads; the first write creates the
directory.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from simcluster.errors import SpecError
from simcluster.sweep.limits import RESULT_FORMATS
from simcluster.sweep.rows import Kind, Row, checked_column_names, column_kind

if TYPE_CHECKING:
    import pyarrow as pa

FORMAT = "simcluster/sweep-results"
VERSION = 1
MANIFEST = "manifest.json"
PARTS = "parts"
PART = re.compile(r"chunk-(\d{6,})\.parquet")
TMP_PREFIX = ".tmp-"


class ResultStore:
    """Chunk results of one sweep (identified by ``key``) in ``directory``.

    Parameters
    ----------
    directory : Path
        The sweep's ``--out`` directory: new, empty, or holding results of the same ``key``.
    key : str
        The sweep's identity (a hash of the scenario file contents and arguments).

    Raises
    ------
    SpecError
        ``--out``: the directory holds something else (another key, another format, other files).
    """

    def __init__(self, directory: Path, key: str) -> None:
        self.directory = Path(directory)
        self.key = key
        self.parts = self.directory / PARTS
        self._created = False  # directory, manifest and parts/ made, stale temporaries dropped
        _check_directory(self.directory, key)

    def done(self) -> set[int]:
        """Indexes of the chunks already stored (complete parts; temporary files are not)."""
        if not self.parts.is_dir():
            return set()
        return {int(m.group(1)) for name in os.listdir(self.parts) if (m := PART.fullmatch(name))}

    def part_path(self, index: int) -> Path:
        """Where chunk ``index``'s rows are stored."""
        return self.parts / f"chunk-{index:06d}.parquet"

    def load(self, index: int) -> list[Row]:
        """The rows stored for chunk ``index``, as :func:`~simcluster.sweep.rows.normalize_rows`
        gives them."""
        import pyarrow.parquet as pq

        path = self.part_path(index)
        try:
            rows: list[Row] = pq.read_table(path).to_pylist()
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise SpecError("--out", f"{path} cannot be read ({exc}); delete it to recompute "
                            "that chunk") from exc
        return rows

    def save(self, index: int, rows: list[Row]) -> None:
        """Store chunk ``index``'s rows (atomically: a temporary file renamed over the part)."""
        import pyarrow.parquet as pq

        self._create()
        table = rows_to_table(rows)
        _atomic_write(self.part_path(index), lambda f: pq.write_table(table, f))

    def finish(self, rows: list[Row], results: str = "parquet") -> tuple[Path, ...]:
        """Write every row as ``results.parquet`` and, when ``results`` is ``csv`` or ``csv.gz``,
        as ``results.csv`` or ``results.csv.gz`` too (each atomically). A CSV of an earlier
        finish that this one does not write is removed, so the directory never holds two
        different tables.

        Returns
        -------
        tuple[Path, ...]
            The Parquet path, then the CSV path when one was written.
        """
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        if results not in RESULT_FORMATS:
            raise ValueError(f"results must be one of {RESULT_FORMATS}, got {results!r}")
        self._create()
        table = rows_to_table(rows)
        parquet = self.directory / "results.parquet"
        _atomic_write(parquet, lambda f: pq.write_table(table, f))
        written: tuple[Path, ...] = (parquet,)
        for form in RESULT_FORMATS[1:]:
            path = self.directory / f"results.{form}"
            if form != results:
                path.unlink(missing_ok=True)
                continue
            _atomic_write(path, _gzip_csv(table) if form.endswith(".gz")
                          else lambda f: pcsv.write_csv(table, f))
            written += (path,)
        return written

    def _create(self) -> None:
        """Create the directory, its manifest (first) and ``parts/``, once; drop stale temp files."""
        if self._created:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        if not (self.directory / MANIFEST).exists():
            manifest = {"format": FORMAT, "version": VERSION, "key": self.key}
            text = json.dumps(manifest, indent=1) + "\n"
            _atomic_write(self.directory / MANIFEST, lambda f: f.write(text.encode()))
        self.parts.mkdir(exist_ok=True)
        for folder in (self.directory, self.parts):  # left by a killed run: never complete
            for stale in folder.glob(f"{TMP_PREFIX}*"):
                stale.unlink(missing_ok=True)
        self._created = True


def rows_to_table(rows: list[Row]) -> pa.Table:
    """``rows`` as a pyarrow table, built column by column (module docstring of
    :mod:`simcluster.sweep.rows`: column order and types)."""
    import pyarrow as pa

    names = checked_column_names(rows)
    columns = []
    for name in names:
        values = [row.get(name) for row in rows]
        arrow_type = getattr(pa, _ARROW[column_kind(name, values)])()
        columns.append(pa.array(values, type=arrow_type))
        del values
    return pa.table(columns, names=names)


# column kind -> the pyarrow type's factory (pyarrow itself is imported on first use)
_ARROW = {Kind.NULL: "null", Kind.BOOL: "bool_", Kind.INT: "int64", Kind.FLOAT: "float64",
          Kind.STRING: "string"}


def _check_directory(directory: Path, key: str) -> None:
    """Refuse ``directory`` unless it is new, empty (temporary files aside) or holds this sweep."""
    if not directory.exists():
        return
    if not directory.is_dir():
        raise SpecError("--out", f"{directory} is not a directory; choose another --out")
    manifest = directory / MANIFEST
    if not manifest.exists():
        if any(not p.name.startswith(TMP_PREFIX) for p in directory.iterdir()):
            raise SpecError("--out", f"{directory} is not empty and holds no sweep results "
                            f"({MANIFEST} is missing); choose another --out or empty it")
        return
    found = _read_manifest(manifest)
    if found.get("format") != FORMAT or found.get("version") != VERSION:
        raise SpecError("--out", f"{directory} holds results in another format "
                        f"({found.get('format')} v{found.get('version')}, expected {FORMAT} "
                        f"v{VERSION}); choose another --out or delete it to start over")
    if found.get("key") != key:
        raise SpecError("--out", f"{directory} holds the results of another sweep (key "
                        f"{found.get('key')}, this sweep's is {key}); choose another --out, or "
                        "delete it to start over")


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise SpecError("--out", f"{path} cannot be read ({exc}); delete the directory or "
                        "choose another --out") from exc
    if not isinstance(found, dict):
        raise SpecError("--out", f"{path} is not a sweep manifest; delete the directory or "
                        "choose another --out")
    return found


def _gzip_csv(table: pa.Table) -> Callable[[IO[bytes]], None]:
    """A writer of ``table`` as gzip-compressed CSV (no timestamp in the header: the same rows
    give the same bytes)."""
    import pyarrow.csv as pcsv

    def write(f: IO[bytes]) -> None:
        with gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as packed:
            pcsv.write_csv(table, packed)
    return write


def _atomic_write(path: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write ``path`` through ``write(file)`` to a temporary name, flush it to disk, rename."""
    with _temporary(path) as tmp:
        with tmp.open("wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


@contextmanager
def _temporary(path: Path) -> Iterator[Path]:
    """A temporary name next to ``path`` (same file system, so the rename is atomic), removed if
    the write fails."""
    tmp = path.with_name(f"{TMP_PREFIX}{os.getpid()}-{path.name}")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise

