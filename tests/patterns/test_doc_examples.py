"""The first example of each pattern page in docs/patterns runs as written."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import uuid
from typing import Any

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'patterns'


@pytest.mark.parametrize('page', ['futures', 'ownership', 'lifetimes', 'executor'])
def test_doc_example_runs(page: str, tmp_path: pathlib.Path, redis_client: Any) -> None:
    text = (DOCS / f'{page}.md').read_text()
    code = re.findall(r'```python\n(.*?)```', text, re.S)[0]
    prefix = {
        'futures': 'futures-example:',
        'ownership': 'own-example:',
        'lifetimes': 'lifetime-example:',
    }.get(page, f'{page}-example:')
    assert prefix in code, f'the {page} example no longer uses the {prefix!r} prefix'
    # A private prefix per run: other runs on the same Redis (a killed earlier
    # run, another checkout's suite) cannot make this check fail or pass.
    prefix_here = f'{prefix[:-1]}-{uuid.uuid4().hex[:8]}:'
    code = code.replace(prefix, prefix_here)
    script = tmp_path / f'{page}.py'
    script.write_text(code)
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert list(redis_client.scan_iter(match=f'{prefix_here}*')) == []
