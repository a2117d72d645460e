"""``import tether.testing`` needs no pytest; the conformance suites do (tether[testing])."""

from __future__ import annotations

import subprocess
import sys


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, '-c', f'{code}\nimport sys\nprint(" ".join(sorted(sys.modules)))'],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


def test_helpers_do_not_import_pytest() -> None:
    loaded = _modules_after('import tether.testing\nfrom tether.testing import hammer')
    assert 'tether.testing.servers' in loaded
    assert 'pytest' not in loaded
    assert 'redis' not in loaded


def test_suites_import_pytest() -> None:
    loaded = _modules_after('import tether.testing.connectors, tether.testing.stream')
    assert 'pytest' in loaded
