"""Persistent agent state: a dictionary that checkpoints to a file and restores from it.

A running behavior gets its own :class:`State` as ``self.agent_state`` (a file named
after the agent id in the state directory), restored from the last checkpoint on first
use, so an agent that its launcher restarts resumes where it was. ``checkpoint()`` writes
atomically (a temporary file, ``fsync``, then a rename), so a crash in the middle leaves
the previous checkpoint intact. A :class:`State` also works on its own::

    state = State('/tmp/my.state')
    state['seen'] = 3
    state.checkpoint()
    assert State('/tmp/my.state')['seen'] == 3

Values are encoded like message values (native types without pickle; other values are
pickled, which is safe here because the file is the agent's own, created with mode 0600).
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shelve
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any, TypeVar

from tether.agents._codec import Codec
from tether.exceptions import AgentStateError

__all__ = ['FileState', 'State', 'agents_home']

_MAGIC = b'TASTATE1'


def agents_home() -> pathlib.Path:
    """Directory of local agent records and state (``$TETHER_AGENTS_HOME``).

    Defaults to ``$XDG_STATE_HOME/tether/agents`` (``~/.local/state/tether/agents``).
    """
    env = os.environ.get('TETHER_AGENTS_HOME')
    if env:
        return pathlib.Path(env)
    base = os.environ.get('XDG_STATE_HOME') or os.path.expanduser('~/.local/state')
    return pathlib.Path(base) / 'tether' / 'agents'


class State(MutableMapping[str, Any]):
    """A dict-like state persisted to ``path``.

    Args:
        path: The checkpoint file (its directory is created if missing).
        autosave: Checkpoint after every change (durable, slower); otherwise call
            :meth:`checkpoint` (agents also checkpoint when they shut down).

    Raises:
        AgentStateError: if an existing checkpoint cannot be read.
    """

    def __init__(self, path: str | os.PathLike[str], *, autosave: bool = False) -> None:
        self.path = pathlib.Path(path)
        self.autosave = autosave
        self._data: dict[str, Any] = {}
        self._lock = threading.RLock()
        self._codec = Codec(allow_pickle=True)
        self.restore()

    def __repr__(self) -> str:
        return f'State({str(self.path)!r}, {len(self._data)} keys)'

    # Mapping ---------------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        with self._lock:
            return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(key, str):
            raise TypeError(f'State keys are strings, got {type(key).__name__}')
        with self._lock:
            self._data[key] = value
            if self.autosave:
                self.checkpoint()

    def __delitem__(self, key: str) -> None:
        with self._lock:
            del self._data[key]
            if self.autosave:
                self.checkpoint()

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)

    # Persistence -----------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the whole state atomically."""
        from tether._wire import encode_head, flatten

        with self._lock:
            buffers: list[Any] = []
            node = self._codec.encode(dict(self._data), buffers)
            sizes, parts = flatten(buffers)
            data = b''.join([_MAGIC, encode_head(0, {'state': node}, sizes), *parts])
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f'.{self.path.name}.{os.getpid()}.tmp')
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, 'wb') as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, self.path)
            except OSError as e:
                raise AgentStateError(f'cannot write agent state {str(self.path)!r}: {e}') from e

    def restore(self) -> None:
        """Load the last checkpoint (an empty state when there is none)."""
        from tether._wire import Limits, decode_frame

        with self._lock:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                self._data = {}
                return
            except OSError as e:
                raise AgentStateError(f'cannot read agent state {str(self.path)!r}: {e}') from e
            try:
                if not raw.startswith(_MAGIC):
                    raise ValueError('not a tether agent state file')
                view = memoryview(raw)[len(_MAGIC) :]
                _f, _t, _r, header, payloads = decode_frame(view, Limits(max_header=1 << 30))
                data = self._codec.decode(header['state'], payloads)
                if not isinstance(data, dict):
                    raise ValueError('state is not a mapping')
            except Exception as e:
                raise AgentStateError(
                    f'cannot read agent state {str(self.path)!r}: {e} (delete the file to '
                    'start from an empty state)',
                ) from e
            self._data = data

    def clear_file(self) -> None:
        """Delete the checkpoint file (the in-memory state is kept)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


V = TypeVar('V')


class FileState(shelve.DbfilenameShelf[V]):
    """academy-py 1.0's file-backed state: a :mod:`shelve` dictionary on ``path``.

    Every assignment is written through to the file (``writeback=False``), so values
    survive the agent; ``close()`` (or a ``with`` block) closes the file. Values are
    pickled, so open only files this agent wrote. tether's own :class:`State` (a
    behavior's ``agent_state``) is restored by the launcher when it restarts an agent.

    Args:
        path: The database file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(os.fspath(path), flag='c', writeback=False)
