"""The mypy plugin types Proxy[T] attributes as T's."""

from __future__ import annotations

import textwrap
from pathlib import Path

from mypy import api


def run_mypy(tmp_path: Path, code: str, plugin: bool = True) -> str:
    (tmp_path / 'sample.py').write_text(textwrap.dedent(code))
    config = tmp_path / 'mypy.ini'
    plugins = 'plugins = tether.mypy_plugin\n' if plugin else ''
    config.write_text(f'[mypy]\nstrict = true\n{plugins}')
    out, err, _ = api.run(
        [
            '--config-file',
            str(config),
            '--cache-dir',
            str(tmp_path / 'cache'),
            str(tmp_path / 'sample.py'),
        ],
    )
    return out + err


SAMPLE = """
    from tether.proxy import Proxy

    def make() -> str:
        return 'x'

    p: Proxy[str] = Proxy(make)
    reveal_type(p.upper())
    n: int = p.upper()
    p.nonexistent
"""


def test_plugin_types_attributes_as_target(tmp_path: Path) -> None:
    out = run_mypy(tmp_path, SAMPLE)
    assert 'Revealed type is "str"' in out or 'Revealed type is "builtins.str"' in out
    assert 'Incompatible types in assignment' in out
    assert '"str" has no attribute "nonexistent"' in out


def test_without_plugin_attributes_are_any(tmp_path: Path) -> None:
    out = run_mypy(tmp_path, SAMPLE, plugin=False)
    assert 'Revealed type is "Any"' in out
    assert 'nonexistent' not in out
