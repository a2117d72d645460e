"""docs/porting.md is true: every tether home it names exists."""

from __future__ import annotations

import importlib
import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'porting.md'
TEXT = DOC.read_text()
ROW = re.compile(r'^\| `(proxystore[\w.]*)` \| (.*?) \|(.*)$', re.M)


def _rows() -> list[tuple[str, str, str]]:
    return [(m[1], m[2].strip(), m[3].strip().strip('|').strip()) for m in ROW.finditer(TEXT)]


def _resolve(path: str) -> object:
    module, _, name = path.rpartition('.')
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module), name)


MODULE_ROWS = [(ps, home) for ps, home, _ in _rows() if home.startswith('`tether') and '.' in ps]
NAME_ROWS = [r for r in _rows() if r[2] is not None]


def test_the_tables_are_there() -> None:
    names = [r for r in _rows() if r[0].count('.') >= 2]
    assert len(names) > 100
    assert TEXT.count('| `proxystore.stream.filters.SamplingFilter` |') == 1


@pytest.mark.parametrize(('ps', 'home'), MODULE_ROWS, ids=[r[0] for r in MODULE_ROWS])
def test_every_home_imports(ps: str, home: str) -> None:
    path = re.match(r'`([\w.]+)`', home)
    assert path is not None
    _resolve(path[1])
    leaf = ps.rsplit('.', 1)[1]
    target = path[1].rsplit('.', 1)[1]
    if leaf[:1].isupper() and target[:1].isupper() and leaf != target:
        # A different name is allowed only with a note saying why.
        row = next(r for r in _rows() if r[0] == ps)
        assert row[2], f'{ps} maps to another name ({target}) without a note'


def test_every_missing_name_says_what_to_use() -> None:
    for ps, home, note in _rows():
        if home.startswith('—'):
            assert note or '(' in home, f'{ps} is not provided and the table does not say why'


def test_same_named_homes_are_the_same_objects_as_documented() -> None:
    from tether import exceptions
    from tether.store import ref
    from tether.stream import events

    assert ref.BaseRefProxyError is exceptions.OwnershipError
    assert events.NewObjectKeyEvent is events.NewObjectEvent
