"""The Globus Compute SDK's home-folder helper on tether's faas home folder."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

from tether.faas import ensure_compute_dir, get_compute_dir


@pytest.fixture
def no_runtime_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv('XDG_RUNTIME_DIR', raising=False)


def test_the_env_folder_is_created_private(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / 'a' / 'faas'
    monkeypatch.setenv('TETHER_FAAS_HOME', str(home))
    assert get_compute_dir() == home
    assert not home.exists()  # get_ only names it
    assert ensure_compute_dir() == home
    assert home.is_dir()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert ensure_compute_dir() == home  # a second call keeps it


def test_empty_env_means_the_default(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, no_runtime_dir: None
) -> None:
    monkeypatch.setenv('TETHER_FAAS_HOME', '')
    monkeypatch.setenv('HOME', str(tmp_path))
    assert ensure_compute_dir() == tmp_path / '.tether' / 'faas'
    assert (tmp_path / '.tether' / 'faas').is_dir()


def test_the_runtime_folder_wins_over_home(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv('TETHER_FAAS_HOME', raising=False)
    monkeypatch.setenv('XDG_RUNTIME_DIR', str(tmp_path))
    assert ensure_compute_dir() == tmp_path / 'tether-faas'


def test_a_file_in_the_way_is_a_clear_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_the_way = tmp_path / 'faas'
    in_the_way.write_text('not a folder')
    monkeypatch.setenv('TETHER_FAAS_HOME', str(in_the_way))
    with pytest.raises(FileExistsError, match=r'Error creating directory .*faas.*in the way'):
        ensure_compute_dir()


def test_a_refusing_parent_raises_permission_error(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locked = tmp_path / 'locked'
    locked.mkdir(mode=0o000)
    # Root writes into a folder of mode 000 all the same; sysfs refuses a folder to all.
    parent = locked if os.geteuid() != 0 else pathlib.Path('/sys')
    monkeypatch.setenv('TETHER_FAAS_HOME', str(parent / f'tether-faas-{tmp_path.name}'))
    try:
        with pytest.raises(PermissionError):
            ensure_compute_dir()
    finally:
        locked.chmod(0o700)
