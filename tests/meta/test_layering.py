"""Imports flow one way (ARCHITECTURE.md section 2); this test enforces it.

Each tether module belongs to a layer; a module may import its own layer and lower
layers only. Optional third-party packages are imported inside the modules that need
them, never at the top of ``tether/__init__.py``.

Within a layer, imports form no circle: no module imports (at module level or inside a
function, which only hides a circle) a module that imports it back, directly or through
others. Imports under ``if TYPE_CHECKING:`` do not count (they never run).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / 'src' / 'tether'

# Lower number = lower layer. Longest matching prefix wins.
LAYERS: dict[str, int] = {
    'tether': 0,
    'tether.exceptions': 0,
    'tether._version': 0,
    'tether._clock': 0,
    'tether.proxy': 1,
    'tether.mypy_plugin': 1,
    'tether.serialize': 2,
    'tether._wire': 2,
    'tether._serve': 2,  # the server kit, beside _wire: connectors and servers use it
    'tether._shm': 2,  # the shared-memory slot kit: the shm connector and the hybrid exchange
    'tether.connectors': 3,
    'tether.store': 4,
    'tether.endpoint': 5,
    'tether.relay': 5,
    'tether.node': 5,
    'tether.stream': 6,
    'tether.plugins': 6,
    'tether.agents': 7,
    'tether.faas': 7,
    'tether.steer': 8,  # above faas (its FaaS task server) and store patterns
    'tether.bench': 7,
    'tether.demo': 8,
    'tether.testing': 8,
    'tether.cli': 9,
    'tether.abc': 9,  # names every seam's contract, so it sits above every subsystem
}


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix('')
    parts = list(rel.parts)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join(parts)


def layer_of(name: str) -> int:
    best = ''
    for prefix in LAYERS:
        if (name == prefix or name.startswith(prefix + '.')) and len(prefix) > len(best):
            best = prefix
    if not best:
        raise AssertionError(f'module {name} has no layer: add it to LAYERS')
    return LAYERS[best]


def imports_of(path: pathlib.Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, node.lineno))
    return [(n, line) for n, line in found if n == 'tether' or n.startswith('tether.')]


MODULES = sorted(SRC.rglob('*.py'))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == 'TYPE_CHECKING') or (
        isinstance(test, ast.Attribute) and test.attr == 'TYPE_CHECKING'
    )


def import_graph(src: pathlib.Path) -> dict[str, set[str]]:
    """Module -> the modules of the package it imports, wherever the import statement is.

    ``from pkg import name`` counts as an import of ``pkg.name`` when that is a module,
    else of ``pkg``. Relative imports are resolved; ``if TYPE_CHECKING:`` blocks skipped.
    """
    paths = {}
    for path in src.rglob('*.py'):
        parts = list(path.relative_to(src.parent).with_suffix('').parts)
        if parts[-1] == '__init__':
            parts.pop()
        paths['.'.join(parts)] = path
    graph: dict[str, set[str]] = {}
    for me, path in paths.items():
        found: set[str] = set()
        package = me if path.name == '__init__.py' else me.rpartition('.')[0]

        def visit(node: ast.AST, package: str = package, found: set[str] = found) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child.test):
                    for other in child.orelse:
                        visit(other)
                    continue
                if isinstance(child, ast.Import):
                    found.update(a.name for a in child.names if a.name in paths)
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ''
                    if child.level:
                        pkg = package
                        for _ in range(child.level - 1):
                            pkg = pkg.rpartition('.')[0]
                        base = f'{pkg}.{base}' if base else pkg
                    for alias in child.names:
                        if f'{base}.{alias.name}' in paths:
                            found.add(f'{base}.{alias.name}')
                        elif base in paths:
                            found.add(base)
                visit(child)

        visit(ast.parse(path.read_text()))
        found.discard(me)
        graph[me] = found
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import circles of ``graph``: its strongly connected parts of two or more."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[frozenset[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                cycles.append(frozenset(part))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return cycles


def test_no_import_cycles() -> None:
    # Within a package too: module-level and function-level imports both count.
    cycles = [sorted(c) for c in import_cycles(import_graph(SRC))]
    assert not cycles, f'import circles (break them with a lower module): {cycles}'


def test_cycle_check_sees_function_level_imports(tmp_path: pathlib.Path) -> None:
    # The checker itself must be able to fail, on a circle hidden in a function.
    pkg = tmp_path / 'tether'
    (pkg / 'store').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'store' / '__init__.py').write_text('')
    (pkg / 'store' / 'a.py').write_text('from tether.store.b import g\n')
    (pkg / 'store' / 'b.py').write_text(
        'from typing import TYPE_CHECKING\n'
        'if TYPE_CHECKING:\n    from tether.store.c import x\n'
        'def g():\n    from tether.store import a\n',
    )
    (pkg / 'store' / 'c.py').write_text('from . import b\n')
    graph = import_graph(pkg)
    assert graph['tether.store.c'] == {'tether.store.b'}
    assert import_cycles(graph) == [frozenset({'tether.store.a', 'tether.store.b'})]


@pytest.mark.parametrize('path', MODULES, ids=lambda p: module_name(p))
def test_imports_flow_downwards(path: pathlib.Path) -> None:
    me = module_name(path)
    mine = layer_of(me)
    for name, line in imports_of(path):
        if name == 'tether':
            continue
        theirs = layer_of(name)
        assert theirs <= mine, (
            f'{me} (layer {mine}) imports {name} (layer {theirs}) at line {line}: '
            'a lower layer must not import a higher one'
        )


def test_package_root_is_light() -> None:
    import subprocess
    import sys

    code = (
        'import sys, tether, tether.proxy, tether.store, tether.serialize\n'
        "heavy = {'redis', 'numpy', 'pandas', 'polars', 'zmq', 'dask', 'parsl'}\n"
        'print(sorted(heavy & set(sys.modules)))\n'
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == '[]'


def test_layer_table_rejects_upward_import() -> None:
    # The checker itself must be able to fail.
    assert layer_of('tether.store._store') > layer_of('tether.proxy')
    assert layer_of('tether.endpoint._server') > layer_of('tether.connectors.endpoint')
    assert layer_of('tether.connectors.node') < layer_of('tether.store')


# Packages whose modules call each other through named functions only; the rest of tether
# still has a few (listed in the issue-9 report), to be named as those packages are next
# worked on.
NAMED_ONLY = ('tether.proxy', 'tether.serialize', 'tether.connectors', 'tether.store')


def private_uses(path: pathlib.Path, modules: set[str]) -> list[str]:
    """``from tether.x import _y`` (``_y`` not a module) and ``x._y`` of an imported module."""
    tree = ast.parse(path.read_text())
    found = []
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith('tether'):
            for alias in node.names:
                full = f'{node.module}.{alias.name}'
                if full in modules:
                    aliases[alias.asname or alias.name] = full
                elif alias.name.startswith('_') and not alias.name.startswith('__'):
                    found.append(f'line {node.lineno}: from {node.module} import {alias.name}')
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules and alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr.startswith('_')
            and not node.attr.startswith('__')
        ):
            found.append(f'line {node.lineno}: {aliases[node.value.id]}.{node.attr}')
    return found


def test_core_modules_use_no_private_names_of_other_modules() -> None:
    modules = set(import_graph(SRC))
    bad = {}
    for path in MODULES:
        name = module_name(path)
        if name.startswith(NAMED_ONLY):
            uses = private_uses(path, modules)
            if uses:
                bad[name] = uses
    assert not bad, f'give these a named (internal) API instead: {bad}'


def test_private_use_check_can_fail(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'm.py'
    path.write_text(
        'from tether.proxy import _MISSING, Proxy\n'
        'from tether.store import factory\n'
        'factory._config_state(1)\n',
    )
    uses = private_uses(path, {'tether.store.factory', 'tether.proxy'})
    assert uses == [
        'line 1: from tether.proxy import _MISSING',
        'line 3: tether.store.factory._config_state',
    ]


# Kits: internal packages any tether package may import, through their package or their
# modules (tether._serve.spawn, tether._wire._frame ...).
KITS = (
    'tether._wire',
    'tether._serve',
    'tether._shm',
    'tether._clock',
    'tether._closing',
    'tether._futures',
    'tether._lazy',
)

# Imports of another subpackage's private module allowed for now: none (issue 26 removed
# the last). Keep it empty: give what is needed a public name, or move it to a kit.
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def _top(name: str) -> str:
    parts = name.split('.')
    return '.'.join(parts[:2])


def private_imports(src: pathlib.Path) -> set[tuple[str, str]]:
    """(importer, imported) for every import of another subpackage's private module or
    private name: ``tether.a.x`` importing ``tether.b._y`` (or ``_name`` from ``tether.b.y``),
    ``a`` != ``b``, wherever the import statement is (in a function too; not under
    ``if TYPE_CHECKING:``, which never runs). Kits (:data:`KITS`) are open to all.
    """
    found: set[tuple[str, str]] = set()
    for path in src.rglob('*.py'):
        parts = list(path.relative_to(src.parent).with_suffix('').parts)
        if parts[-1] == '__init__':
            parts.pop()
        me = '.'.join(parts)
        package = me if path.name == '__init__.py' else me.rpartition('.')[0]
        names: list[str] = []

        def visit(node: ast.AST, package: str = package, names: list[str] = names) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and _is_type_checking(child.test):
                    for other in child.orelse:
                        visit(other)
                    continue
                if isinstance(child, ast.Import):
                    names.extend(a.name for a in child.names)
                elif isinstance(child, ast.ImportFrom):
                    base = child.module or ''
                    if child.level:
                        pkg = package
                        for _ in range(child.level - 1):
                            pkg = pkg.rpartition('.')[0]
                        base = f'{pkg}.{base}' if base else pkg
                    names.append(base)
                    names.extend(f'{base}.{a.name}' for a in child.names)
                visit(child)

        visit(ast.parse(path.read_text()))
        for name in names:
            segments = name.split('.')
            if segments[0] != 'tether' or len(segments) < 2:
                continue
            top = _top(name)
            if top == _top(me) or top in KITS:
                continue
            if any(s.startswith('_') and not s.startswith('__') for s in segments[2:]):
                found.add((me, _private_module(name)))
    return found


def test_no_private_module_of_another_subpackage_is_imported() -> None:
    found = private_imports(SRC)
    new = sorted(f'{a} imports {b}' for a, b in found - KNOWN_PRIVATE_IMPORTS)
    assert not new, (
        "a subpackage imports another one's private module: give what it needs a public "
        f'name, or move it to a kit ({", ".join(KITS)}): {new}'
    )


def _private_module(name: str) -> str:
    """``tether.b._y`` of ``tether.b._y.z`` or ``tether.b._y._name``: the first private part."""
    segments = name.split('.')
    for i, s in enumerate(segments[2:], start=2):
        if s.startswith('_') and not s.startswith('__'):
            return '.'.join(segments[: i + 1])
    return name


def test_private_import_check_can_fail(tmp_path: pathlib.Path) -> None:
    # The checker itself must be able to fail: a private module of another subpackage,
    # at module level, in a function, by a relative import, or a private name; kits,
    # its own subpackage and TYPE_CHECKING imports pass.
    pkg = tmp_path / 'tether'
    for sub in ('node', 'endpoint', '_serve'):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / '__init__.py').write_text('')
    (pkg / '__init__.py').write_text('')
    (pkg / 'node' / '_state.py').write_text('def f(): pass\n')
    (pkg / 'endpoint' / '_server.py').write_text(
        'from tether.node._state import f\n'
        'from tether._serve.spawn import g\n'
        'from tether.endpoint._other import h\n'
        'from typing import TYPE_CHECKING\n'
        'if TYPE_CHECKING:\n    from tether.node._hidden import x\n'
        'def later():\n    import tether.node._spawn\n',
    )
    (pkg / 'endpoint' / 'cli.py').write_text(
        'from ..node import _objects\nfrom tether.node import _secret_name\n'
    )
    assert private_imports(pkg) == {
        ('tether.endpoint._server', 'tether.node._state'),
        ('tether.endpoint._server', 'tether.node._spawn'),
        ('tether.endpoint.cli', 'tether.node._objects'),
        ('tether.endpoint.cli', 'tether.node._secret_name'),
    }
