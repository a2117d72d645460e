"""docs/porting.md's Globus Compute map is true: every tether home it names exists, and
the same-named homes are the objects the SDK's names stand for."""

from __future__ import annotations

import importlib
import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'porting.md'
SECTION = DOC.read_text().split('# Porting from Globus Compute', 1)[1]
ROW = re.compile(r'^\| `(globus_compute_sdk[\w.*]*)`.*? \| (.*?) \|(.*)$', re.M)
HOMES = sorted({h for m in ROW.finditer(SECTION) for h in re.findall(r'`(tether\.[\w.]+)`', m[2])})


def _resolve(path: str) -> object:
    module, _, name = path.rpartition('.')
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module), name)


def test_the_table_is_there() -> None:
    assert len(HOMES) >= 15
    assert 'tether.faas.ShellFunction' in HOMES


@pytest.mark.parametrize('home', HOMES)
def test_every_home_imports(home: str) -> None:
    assert _resolve(home) is not None


def test_every_missing_name_says_why() -> None:
    for m in ROW.finditer(SECTION):
        if m[2].strip().startswith('—'):
            assert m[3].strip(' |'), f'{m[1]} is not provided and the table does not say why'


def test_compute_future_is_task_future() -> None:
    from tether.faas import ComputeFuture, TaskFuture

    assert ComputeFuture is TaskFuture
