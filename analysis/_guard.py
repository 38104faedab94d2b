"""One-line errors for the analysis scripts: a missing input file or optional package exits 2.

Each script ends with ``sys.exit(guarded("name.py", main, sys.argv))``: a file that is not there
(the measurement files the fit scripts read are not shipped with the repository), an unreadable
one or matplotlib not installed prints one line naming it and returns 2, never a traceback.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from simcluster.errors import SpecError

Main = Callable[[Sequence[str]], int | None]


def guarded(name: str, main: Main, argv: Sequence[str]) -> int:
    """Run ``main(argv)``; expected input problems become one line on stderr and status 2."""
    try:
        return main(argv) or 0
    except ModuleNotFoundError as err:
        hint = " (pip install 'simcluster[plots]')" if err.name == "matplotlib" else ""
        return _fail(name, f"needs the Python package {err.name}{hint}")
    except OSError as err:
        return _fail(name, f"{err.filename}: {err.strerror}" if err.filename else str(err))
    except SpecError as err:
        return _fail(name, str(err))


def _fail(name: str, message: str) -> int:
    print(f"{name}: {message}", file=sys.stderr)
    return 2
