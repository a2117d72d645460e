"""Tests never sleep for a fixed time (docs/testing.md): no ``time.sleep(c)`` or
``asyncio.sleep(c)`` with a constant ``c > 0`` outside a loop, in the tests or in the
scripts they give child interpreters (string literals that parse as Python).

A sleep inside a loop is a poll for a condition (or paced work of a simulated task); a
sleep of its own is a wait for something to have happened, which a loaded machine breaks.
Wait for an event or a condition instead, or advance a ``tether.testing.FakeClock``; a
process that must stay until killed waits on an event or ``signal.pause()``.
"""

from __future__ import annotations

import ast
import pathlib
import textwrap
from collections.abc import Iterator

TESTS = pathlib.Path(__file__).resolve().parents[1]


def _is_constant_sleep(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or not node.args:
        return False
    f = node.func
    if isinstance(f, ast.Attribute):
        named = f.attr == 'sleep' and isinstance(f.value, ast.Name)
        if not named or f.value.id not in ('time', 'asyncio'):  # type: ignore[attr-defined]
            return False
    elif not (isinstance(f, ast.Name) and f.id == 'sleep'):
        return False
    arg = node.args[0]
    return isinstance(arg, ast.Constant) and isinstance(arg.value, int | float) and arg.value > 0


def _source_of(node: ast.AST, parent: ast.AST | None) -> str | None:
    """The text of a string literal (an f-string's fields as a name), if it may be code."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return None if isinstance(parent, ast.JoinedStr) else node.value
    if isinstance(node, ast.JoinedStr):
        parts = node.values
        return ''.join(str(v.value) if isinstance(v, ast.Constant) else '_x' for v in parts)
    return None


def fixed_sleeps(tree: ast.AST, where: str, depth: int = 0) -> Iterator[str]:
    """``where:line`` of each constant sleep outside a loop in ``tree`` and its scripts."""
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    for node in ast.walk(tree):
        if _is_constant_sleep(node):
            p = parents.get(node)
            while p is not None and not isinstance(p, ast.While | ast.For | ast.AsyncFor):
                p = parents.get(p)
            if p is None:
                yield f'{where}:{node.lineno}'  # type: ignore[attr-defined]
        text = _source_of(node, parents.get(node))
        if text is not None and 'sleep(' in text and depth < 3:
            try:
                script = ast.parse(textwrap.dedent(text))
            except SyntaxError:
                continue
            line = node.lineno  # type: ignore[attr-defined]
            yield from fixed_sleeps(script, f'{where}:{line} (script)', depth + 1)


def test_the_finder_finds_fixed_sleeps_and_not_polls() -> None:
    code = textwrap.dedent("""
        import asyncio, time
        time.sleep(0.3)
        while not done():
            time.sleep(0.01)
        time.sleep(0)
        clock.sleep(5)
        run("import time; time.sleep(600)")
        async def f():
            await asyncio.sleep(1)
    """)
    assert list(fixed_sleeps(ast.parse(code), 'x')) == ['x:3', 'x:8 (script):1', 'x:10']


def test_no_test_sleeps_for_a_fixed_time() -> None:
    found = [
        hit
        for path in sorted(TESTS.rglob('*.py'))
        if path != pathlib.Path(__file__).resolve()  # its own example above
        for hit in fixed_sleeps(ast.parse(path.read_text()), str(path.relative_to(TESTS)))
    ]
    assert found == [], 'fixed sleeps (wait on an event or a condition instead):\n' + '\n'.join(
        found
    )
