"""The examples of docs/stream.md run (each shim's example against its real broker)."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

PAGE = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'stream.md'
_FENCE = re.compile(r'^```python[ \t]*\n(.*?)^```[ \t]*$', re.MULTILINE | re.DOTALL)


def test_stream_doc_examples_run(tmp_path: pathlib.Path) -> None:
    blocks = _FENCE.findall(PAGE.read_text())
    assert len(blocks) >= 10  # the intro, the format, the setup and one per shim
    script = tmp_path / 'example.py'
    script.write_text('\n'.join(blocks))
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, 'TMPDIR': str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("['item 0', 'item 1', 'item 2']") == 8, out  # one per shim
    assert 'refused:' in out
