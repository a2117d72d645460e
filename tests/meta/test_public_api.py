"""Every public module has an explicit, sorted, complete and importable ``__all__``."""

from __future__ import annotations

import ast
import importlib
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[2] / 'src' / 'tether'


def public_modules() -> list[str]:
    names = []
    for path in sorted(SRC.rglob('*.py')):
        rel = path.relative_to(SRC.parent).with_suffix('')
        parts = list(rel.parts)
        if parts[-1] == '__init__':
            parts.pop()
        if any(p.startswith('_') for p in parts):
            continue
        names.append('.'.join(parts))
    return names


OPTIONAL = {'tether.mypy_plugin'}


@pytest.mark.parametrize('name', public_modules())
def test_all_is_sorted_complete_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, '__all__', None)
    assert exported is not None, f'{name} has no __all__'
    assert list(exported) == sorted(exported), f'{name}.__all__ is not sorted'
    assert len(set(exported)) == len(exported), f'{name}.__all__ has duplicates'
    for attr in exported:
        assert hasattr(module, attr), f'{name}.__all__ names {attr!r}, which is missing'
    # Complete: every public class or function defined in the module is exported.
    path = pathlib.Path(module.__file__ or '')
    tree = ast.parse(path.read_text())
    for node in tree.body:
        public = not node.name.startswith('_') if hasattr(node, 'name') else False
        if (
            isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and public
            and name not in OPTIONAL
        ):
            assert node.name in exported, f'{name}.{node.name} is public but not in __all__'
