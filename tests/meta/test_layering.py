"""Imports flow one way (ARCHITECTURE.md section 2); this test enforces it.

Each tether module belongs to a layer; a module may import its own layer and lower
layers only. Optional third-party packages are imported inside the modules that need
them, never at the top of ``tether/__init__.py``.
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
    'tether.proxy': 1,
    'tether.mypy_plugin': 1,
    'tether.serialize': 2,
    'tether._wire': 2,
    'tether.connectors': 3,
    'tether.store': 4,
    'tether.endpoint': 5,
    'tether.relay': 5,
    'tether.node': 5,
    'tether.connectors.node': 5,
    'tether.connectors.endpoint': 5,
    'tether.connectors.multi': 5,
    'tether.stream': 6,
    'tether.plugins': 6,
    'tether.agents': 7,
    'tether.faas': 7,
    'tether.steer': 8,  # above faas (its FaaS task server) and store patterns
    'tether.bench': 7,
    'tether.demo': 8,
    'tether.testing': 8,
    'tether.cli': 9,
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
    assert layer_of('tether.connectors.node') > layer_of('tether.store')
