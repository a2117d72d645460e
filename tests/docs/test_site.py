"""The documentation site's hooks: one reference page per public module, roles to links.

``make docs`` (part of ``make test``) builds the site in strict mode; these tests check
the pieces of ``scripts/docs_site.py`` that decide what the site contains.
"""

from __future__ import annotations

import importlib.util
import pathlib
import types
from typing import Any

import pytest

from tests.meta.test_public_api import public_modules as meta_public_modules

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location('docs_site', ROOT / 'scripts' / 'docs_site.py')
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


site = _load()


def test_every_public_module_gets_a_reference_page() -> None:
    assert site.public_modules() == sorted(meta_public_modules())
    assert 'tether.store.future' in site.public_modules()
    assert not any('._' in m for m in site.public_modules())


def test_a_new_module_appears_without_editing_a_list(tmp_path: pathlib.Path) -> None:
    pkg = tmp_path / 'tether'
    (pkg / 'steer' / '_internal').mkdir(parents=True)
    for name in ('__init__.py', 'steer/__init__.py', 'steer/thinker.py', 'steer/_q.py'):
        (pkg / name).write_text('')
    (pkg / 'steer' / '_internal' / 'x.py').write_text('')
    assert site.public_modules(pkg) == ['tether', 'tether.steer', 'tether.steer.thinker']
    path, text = site.reference_page('tether.steer.thinker')
    assert path == 'reference/tether/steer/thinker.md'
    assert '::: tether.steer.thinker' in text


@pytest.mark.parametrize(
    ('rst', 'markdown'),
    [
        (':class:`Store`', '[`Store`][Store]'),
        (':class:`~tether.store.Store`', '[`Store`][tether.store.Store]'),
        (':meth:`.close`', '[`close`][close]'),
        (':func:`resolve()`', '[`resolve()`][resolve]'),
        (':meth:`extended\n  <LeaseLifetime.extend>`', '[extended][LeaseLifetime.extend]'),
        (':class:`queue.Queue`', '`queue.Queue`'),
        (':class:`~concurrent.futures.Future`', '`Future`'),
        (':mod:`tether._wire`', '`tether._wire`'),
        (':func:`pickle`', '`pickle`'),
        (':class:`TypeError`', '`TypeError`'),
        (':exc:`~NotImplementedError`', '`NotImplementedError`'),
        (':meth:`set`', '`set`'),
        (':class:`object <object>`', 'object (`object`)'),
        ('Usage::\n\n    x = 1\n', 'Usage:\n\n    x = 1\n'),
        ('::\n\n    x = 1\n', '\n\n    x = 1\n'),
        ('a ``literal``', 'a ``literal``'),
    ],
)
def test_roles_become_cross_references(rst: str, markdown: str) -> None:
    assert site.convert_docstring(rst) == markdown


def test_unlisted_pages_join_the_nav(tmp_path: pathlib.Path) -> None:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import get_files

    for name in ('index.md', 'new.md'):
        (tmp_path / name).write_text('# x\n')
    config = MkDocsConfig()
    config.load_dict(
        {
            'site_name': 'x',
            'docs_dir': str(tmp_path),
            'nav': ['index.md'],
            'hooks': [str(ROOT / 'scripts' / 'docs_site.py')],
        },
    )
    errors, _ = config.validate()
    assert errors == []
    files = config.plugins.on_files(get_files(config), config=config)
    assert config['nav'][1] == {'More': ['new.md']}
    reference: list[Any] = config['nav'][2]['API reference']
    assert reference[0] == {'tether': 'reference/tether.md'}
    assert {'tether.proxy': 'reference/tether/proxy.md'} in reference
    (store,) = [e['tether.store'] for e in reference if 'tether.store' in e]
    assert store[0] == {'tether.store': 'reference/tether/store.md'}
    assert {'tether.store.future': 'reference/tether/store/future.md'} in store
    assert _pages(reference) == sorted(site.public_modules())
    assert files.get_file_from_path('reference/tether/store.md') is not None


def _pages(nav: Any) -> list[str]:
    """The module names of every page in a nav, each once."""
    found: set[str] = set()
    for entry in nav:
        for name, value in entry.items():
            if isinstance(value, str):
                found.add(name)
            else:
                found.update(_pages(value))
    return sorted(found)
