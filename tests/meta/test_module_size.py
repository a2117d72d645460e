"""No module of the package is longer than 600 lines (issue 26: small modules with one job)."""

from __future__ import annotations

from pathlib import Path

import tether

_LIMIT = 600
_ROOT = Path(tether.__file__).parent


def _long_modules(root: Path, limit: int) -> list[str]:
    found = []
    for path in sorted(root.rglob('*.py')):
        lines = path.read_text(encoding='utf-8').count('\n')
        if lines > limit:
            found.append(f'{path.relative_to(root)}: {lines} lines')
    return found


def test_no_module_over_the_limit() -> None:
    assert _long_modules(_ROOT, _LIMIT) == []


def test_the_check_sees_a_long_module(tmp_path: Path) -> None:
    (tmp_path / 'short.py').write_text('x = 1\n')
    (tmp_path / 'long.py').write_text('x = 1\n' * 3)
    assert _long_modules(tmp_path, 2) == ['long.py: 3 lines']
