"""The Python examples in README.md and docs/ run, so the docs stay true.

Every ```python block of a page runs, in order, in one fresh interpreter (later blocks of
a page may use what earlier ones defined), as a script in a temporary directory. A block
preceded by the line ``<!-- no-run -->`` is skipped; use that sparingly. Examples that
need Redis use the shared server at 127.0.0.1:6379 (CI starts it). The pages' scripts run
ahead of their tests, a few at once, the longest first (see ``example_runs``), so examples
must not depend on each other: each uses names and key prefixes of its own.
"""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator

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


# Pages whose examples run at once: most of an example's time is spent waiting for the
# frameworks it starts (Dask, Parsl, the function service ...), not computing.
PARALLEL = 3
# Examples that run alone: a Ray node gives its raylet 30 s (fixed in Ray) to register,
# which a machine busy with other examples can miss.
ALONE = ('import ray',)
# The pages whose examples take longest (5 to 15 s each on a quiet 2-core machine, the
# others 1 to 3 s), longest first. The runs start with those that run alone, then these,
# then the others in the tests' order: started in the tests' order, the long runs came
# late (parsl, ray, testing) and the last of them ran with the other slots idle.
LONG_FIRST = (
    'docs/testing.md',
    'docs/patterns/parsl.md',
    'docs/connectors/redis.md',
    'docs/patterns/futures.md',
    'docs/endpoints.md',
    'docs/faas.md',
    'docs/patterns/dask.md',
)

Run = concurrent.futures.Future[subprocess.CompletedProcess[str]]


def run_script(script: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a fresh interpreter, in a temporary directory of its own."""
    with tempfile.TemporaryDirectory(prefix='tether-doc-') as cwd:
        # A short TMPDIR: Ray's Unix socket paths must stay under 108 bytes.
        short_tmp = tempfile.mkdtemp(prefix='tdoc', dir='/tmp')
        try:
            path = pathlib.Path(cwd) / 'example.py'
            path.write_text(script)
            return subprocess.run(
                [sys.executable, str(path)],
                cwd=cwd,
                env={
                    **os.environ,
                    'TMPDIR': short_tmp,
                    # Scripts of the environment (Parsl's interchange ...) come first.
                    'PATH': os.pathsep.join([os.path.dirname(sys.executable), os.environ['PATH']]),
                },
                capture_output=True,
                text=True,
                timeout=110,
                check=False,
            )
        finally:
            shutil.rmtree(short_tmp, ignore_errors=True)


def _run_into(run: Run, script: str, release: Callable[[], None]) -> None:
    try:
        if run.set_running_or_notify_cancel():
            try:
                run.set_result(run_script(script))
            except Exception as e:  # the test raises it
                run.set_exception(e)
    finally:
        release()


def start_order(pages: list[pathlib.Path]) -> list[pathlib.Path]:
    """The pages in the order their runs start: those that run ALONE, then LONG_FIRST
    (longest first), then the others in the order given."""

    def rank(page: pathlib.Path) -> tuple[int, int]:
        if any(a in script_of(page) for a in ALONE):
            return (0, 0)
        name = str(page.relative_to(ROOT))
        if name in LONG_FIRST:
            return (1, LONG_FIRST.index(name))
        return (2, 0)

    return sorted(pages, key=rank)  # stable: the others keep the order given


def test_start_order() -> None:
    pages = [ROOT / 'README.md', ROOT / 'docs' / 'wire.md', ROOT / 'docs' / 'testing.md']
    ray = ROOT / 'docs' / 'patterns' / 'ray.md'
    assert start_order([*pages, ray]) == [ray, pages[2], pages[0], pages[1]]


def _start_in_order(scripts: list[tuple[Run, str]]) -> None:
    """Start the runs in order, PARALLEL at a time (one that must run ALONE waits for the
    runs before it, and the runs after it wait for it)."""
    slots = threading.Semaphore(PARALLEL)
    for run, script in scripts:
        width = PARALLEL if any(a in script for a in ALONE) else 1
        for _ in range(width):
            slots.acquire()

        def release(width: int = width) -> None:
            slots.release(width)

        threading.Thread(target=_run_into, args=(run, script, release), daemon=True).start()
    for _ in range(PARALLEL):  # every run has ended
        slots.acquire()


@pytest.fixture(scope='module')
def example_runs(request: pytest.FixtureRequest) -> Iterator[dict[pathlib.Path, Run]]:
    """The runs of the selected pages' examples, started ahead (in ``start_order``): each
    test waits for its own page's run."""
    pages = [
        page
        for item in request.session.items
        if isinstance(item, pytest.Function)
        and item.originalname == 'test_examples_run'
        and item.module is sys.modules[__name__]
        and isinstance(page := item.callspec.params['page'], pathlib.Path)
    ]
    runs: dict[pathlib.Path, Run] = {}
    scripts = []
    for page in start_order(pages):
        if script := script_of(page):
            runs[page] = concurrent.futures.Future()
            scripts.append((runs[page], script))
    starter = threading.Thread(target=_start_in_order, args=(scripts,), daemon=True)
    starter.start()
    yield runs
    for run in runs.values():
        run.cancel()  # those not started yet
    starter.join()


@pytest.mark.parametrize('page', PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_examples_run(
    page: pathlib.Path,
    example_runs: dict[pathlib.Path, Run],
    request: pytest.FixtureRequest,
) -> None:
    script = script_of(page)
    if not script:
        assert page.name in MAP_PAGES, f'{page} has no runnable example'
        return
    if 'RedisConnector(' in script:
        request.getfixturevalue('redis_available')  # a clear failure when Redis is down
    proc = example_runs[page].result()
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
