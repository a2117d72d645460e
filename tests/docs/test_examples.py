"""The Python examples in README.md and docs/ run, so the docs stay true.

Every ```python block of a page runs, in order, in one fresh interpreter (later blocks of
a page may use what earlier ones defined), as a script in a temporary directory. A block
preceded by the line ``<!-- no-run -->`` is skipped; use that sparingly. Examples that
need Redis use the shared server at 127.0.0.1:6379 (CI starts it).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / 'README.md', *(ROOT / 'docs').glob('*.md'), *(ROOT / 'docs').glob('*/*.md')],
)
NO_RUN = '<!-- no-run -->'
# Pages that map other pages and carry no example of their own.
MAP_PAGES = ('architecture.md', 'index.md', 'performance.md')

_FENCE = re.compile(r'^```python[ \t]*\n(.*?)^```[ \t]*$', re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str, bool]]:
    """Return ``(line, code, runs)`` for each ```python block of a Markdown text."""
    blocks = []
    for m in _FENCE.finditer(text):
        line = text.count('\n', 0, m.start()) + 1
        before = text[: m.start()].rstrip().rsplit('\n', 1)[-1].strip()
        blocks.append((line, m.group(1), before != NO_RUN))
    return blocks


def script_of(page: pathlib.Path) -> str:
    """The page's runnable blocks as one script, each block marked with its line."""
    rel = page.relative_to(ROOT)
    parts = []
    for line, code, runs in python_blocks(page.read_text()):
        if runs:
            parts.append(f'# ---- {rel}, block at line {line}\n{code}')
    return '\n'.join(parts)


def test_block_parser() -> None:
    text = 'a\n```python\nx = 1\n```\n\n<!-- no-run -->\n```python\ny = 2\n```\n'
    assert python_blocks(text) == [(2, 'x = 1\n', True), (7, 'y = 2\n', False)]


def test_every_page_has_an_example() -> None:
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert 'docs/index.md' in names
    for page in PAGES:
        if page.name in MAP_PAGES:
            continue
        assert any(runs for _, _, runs in python_blocks(page.read_text())), page


@pytest.mark.parametrize('page', PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_examples_run(
    page: pathlib.Path,
    tmp_path: pathlib.Path,
    request: pytest.FixtureRequest,
) -> None:
    script = script_of(page)
    if not script:
        assert page.name in MAP_PAGES, f'{page} has no runnable example'
        return
    if 'RedisConnector(' in script:
        request.getfixturevalue('redis_available')  # a clear failure when Redis is down
    path = tmp_path / 'example.py'
    path.write_text(script)
    short_tmp = tempfile.mkdtemp(prefix='tdoc', dir='/tmp')
    request.addfinalizer(lambda: shutil.rmtree(short_tmp, ignore_errors=True))
    proc = subprocess.run(
        [sys.executable, str(path)],
        cwd=tmp_path,
        env={
            **os.environ,
            # A short TMPDIR: Ray's Unix socket paths must stay under 108 bytes.
            'TMPDIR': short_tmp,
            # Scripts of the environment (Parsl's interchange ...) come first on PATH.
            'PATH': os.pathsep.join([os.path.dirname(sys.executable), os.environ['PATH']]),
        },
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert proc.returncode == 0, (
        f'examples of {page.relative_to(ROOT)} failed:\n{proc.stderr}\n--- script ---\n{script}'
    )


_LINK = re.compile(r'\]\(([^)#\s]+)(?:#[^)]*)?\)')


@pytest.mark.parametrize('page', PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_exist(page: pathlib.Path) -> None:
    for target in _LINK.findall(page.read_text()):
        if '://' in target:
            continue
        path = (page.parent / target).resolve()
        if path.name == 'performance.md' and not path.exists():
            # Written by the benchmark issues (each adds its section); linked before.
            continue
        assert path.exists(), f'{page.relative_to(ROOT)} links to missing {target}'
