"""Persistent state: checkpoint, restore, atomic writes, clear errors."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from tether.agents import State
from tether.exceptions import AgentStateError


def test_checkpoint_and_restore(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 's' / 'a.state'
    state = State(path)
    state['n'] = 3
    state['data'] = {'x': (1, 2), 'arr': np.arange(3)}
    state['obj'] = complex(1, 2)
    assert not path.exists()
    state.checkpoint()
    again = State(path)
    assert again['n'] == 3
    assert again['data']['x'] == (1, 2)
    assert np.array_equal(again['data']['arr'], np.arange(3))
    assert dict(again).keys() == {'n', 'data', 'obj'}
    assert (path.stat().st_mode & 0o777) == 0o600
    del again['n']
    assert 'n' not in again
    assert len(again) == 2


def test_autosave(tmp_path: pathlib.Path) -> None:
    state = State(tmp_path / 'b.state', autosave=True)
    state['k'] = 'v'
    assert State(tmp_path / 'b.state')['k'] == 'v'
    with pytest.raises(TypeError):
        state[1] = 2  # type: ignore[index]


def test_corrupt_state_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'c.state'
    path.write_bytes(b'not a state file')
    with pytest.raises(AgentStateError, match='delete the file'):
        State(path)


def test_truncated_state_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'd.state'
    state = State(path)
    state['data'] = b'x' * 1000
    state.checkpoint()
    path.write_bytes(path.read_bytes()[:-10])  # a checkpoint cut short (a full disk ...)
    with pytest.raises(AgentStateError, match='does not match its frame'):
        State(path)
