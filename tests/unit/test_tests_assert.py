"""Every test function asserts something (issue 15: a test with no assertion passes whatever
the code does). A test counts as asserting when its body, or a module-level helper it calls
(transitively), holds an ``assert``, a ``pytest.raises``/``pytest.warns``/``pytest.fail`` or a
call whose name starts with ``assert``/``check`` (hypothesis and helper conventions here)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
CHECKING_CALLS = ("raises", "warns", "fail")
CHECKING_PREFIXES = ("assert", "_assert", "check", "_check")


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _asserts(fn: ast.FunctionDef, helpers: set[str]) -> bool:
    for node in ast.walk(fn):
        if isinstance(node, ast.Assert):
            return True
        if isinstance(node, ast.Call):
            name = _call_name(node)
            if name in CHECKING_CALLS or name in helpers or name.startswith(CHECKING_PREFIXES):
                return True
    return False


def _silent_tests(tree: ast.Module) -> list[str]:
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    helpers: set[str] = set()
    grew = True
    while grew:  # a helper that calls an asserting helper asserts too
        new = {f.name for f in functions
               if not f.name.startswith("test") and f.name not in helpers and _asserts(f, helpers)}
        helpers |= new
        grew = bool(new)
    return [f"{f.name}:{f.lineno}" for f in functions
            if f.name.startswith("test") and not _asserts(f, helpers)]


def test_the_scan_finds_a_silent_test() -> None:
    tree = ast.parse("def helper(x):\n    assert x\n\n"
                     "def test_ok():\n    helper(1)\n\n"
                     "def test_silent():\n    print(1)\n")
    assert _silent_tests(tree) == ["test_silent:7"]


def test_every_test_asserts_something() -> None:
    silent = {str(path.relative_to(TESTS)): found for path in sorted(TESTS.rglob("*.py"))
              if (found := _silent_tests(ast.parse(path.read_text())))}
    assert silent == {}
