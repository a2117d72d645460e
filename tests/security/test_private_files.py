"""tether._keyfile.write_private: atomic, owner-only, every byte written."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

from tether._keyfile import write_private


def test_replaces_the_file_with_every_byte_owner_only(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'state'
    path.write_bytes(b'old')
    data = os.urandom(3 << 20)
    write_private(path, data)
    assert path.read_bytes() == data
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ['state']


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'state'
    path.write_bytes(b'old')
    with pytest.raises(TypeError):
        write_private(path, 'not bytes')  # type: ignore[arg-type]
    assert path.read_bytes() == b'old'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['state']
