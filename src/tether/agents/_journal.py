"""The in-flight journal: which requests an agent process accepted and has not answered.

An agent that runs in a process of its own (process, Parsl and daemon launchers) appends
one line per accepted request and one per finished one to ``<state dir>/<id>.inflight``
(unbuffered writes, so the lines survive a SIGKILL of the process; a finished line
waits for the next write, see :meth:`Journal.finished`). When the process
dies, its launcher (and, failing that, the next incarnation of the agent) reads the
journal and answers every request that was accepted and never finished with
:class:`~tether.exceptions.AgentCrashedError`, so that no caller waits for a reply that
will never come. Requests are never re-run: an action may have had effects before the
crash, and only the caller can tell whether running it again is safe.

A request accepted by a process that then died may come again: the hybrid exchange
acknowledges direct messages a few milliseconds after delivering them, and sends what was
not acknowledged again through Redis. So reading a dead process's journal also leaves the
requests it had accepted (answered or not) in the file as *seen*, and the next
incarnation drops them if they arrive (:attr:`Journal.seen`).

Lines are JSON arrays: ``["+", tag, caller, action]`` (accepted and started),
``["w", tag, caller, action]`` (accepted, waiting for a free slot: ``max_concurrency``),
``[">", tag, caller]`` (a waiting request started), ``["-", tag, caller]`` and
``["=", tag, caller]`` (seen by an earlier incarnation). A request that never started is
answered with ``AgentCrashedError(started=False)``: its action did not run. The file is
rewritten with only the live entries and the most recent finished ones when it grows
past :data:`COMPACT_AT` bytes.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from tether._keyfile import write_private

if TYPE_CHECKING:
    from tether.agents.exchange import Exchange

__all__ = ['COMPACT_AT', 'Journal', 'answer_lost', 'forget', 'read_lost', 'read_lost_started']

logger = logging.getLogger(__name__)

COMPACT_AT = 1 << 20
"""Size in bytes past which the journal is rewritten with only its live entries."""

_KEEP_SEEN = 4096
"""Most finished (or seen) requests a journal remembers for the next incarnation."""


class Journal:
    """The in-flight journal of one agent process (thread-safe).

    Args:
        path: The journal file (created with mode 0600). Requests an earlier incarnation
            left in it as seen (see :func:`read_lost`) are in :attr:`seen`.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or '.', mode=0o700, exist_ok=True)
        self.seen: list[tuple[str, int]] = [key for key, _ in _read(path)]
        self._live: dict[tuple[str, int], tuple[str, bool]] = {}
        self._done: collections.deque[tuple[str, int]] = collections.deque(
            self.seen[-_KEEP_SEEN:], maxlen=_KEEP_SEEN
        )
        self._lock = threading.Lock()
        self._strings: dict[str, str] = {}
        self._pending: list[bytes] = []
        self._started = 0  # accepted lines so far, and how many of them are written
        self._written = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._size = os.fstat(self._fd).st_size

    def _json(self, text: str) -> str:
        # Callers and actions repeat: their JSON strings are kept (a few hundred at most).
        found = self._strings.get(text)
        if found is None:
            if len(self._strings) > 256:
                self._strings.clear()
            found = self._strings[text] = json.dumps(text)
        return found

    def started(
        self, caller: str, tag: int, action: str, *, flush: bool = True, waiting: bool = False
    ) -> int:
        """Record an accepted request; returns the line's number for :meth:`ensure`.

        ``waiting``: it waits for a free slot (it has not started; :meth:`running` records
        when it does).

        With ``flush=False`` the line waits: :meth:`ensure` must be called with its
        number before the action runs (the agent wakes the action's thread first and
        writes while that thread wakes up; the thread ensures it too before it runs the
        action, and whichever comes first writes it).
        """
        mark = 'w' if waiting else '+'
        line = f'["{mark}", {int(tag)}, {self._json(caller)}, {self._json(action)}]\n'.encode()
        with self._lock:
            self._live[(caller, tag)] = (action, not waiting)
            self._started += 1
            self._pending.append(line)
            if flush:
                self._flush()
            return self._started

    def running(self, caller: str, tag: int) -> None:
        """Record that a waiting request starts (written at once, before it runs)."""
        with self._lock:
            live = self._live.get((caller, tag))
            if live is None or live[1]:
                return
            self._live[(caller, tag)] = (live[0], True)
            self._pending.append(f'[">", {int(tag)}, {self._json(caller)}]\n'.encode())
            self._flush()

    def ensure(self, number: int) -> None:
        """Make sure accepted line ``number`` is written (with what waits before it)."""
        if self._written >= number:
            return
        with self._lock:
            if self._written < number:
                self._flush()

    def finished(self, caller: str, tag: int, *, flush: bool = True) -> None:
        """Record that a request was answered (or will never need an answer).

        With ``flush=False`` the line waits for the next write (the next accepted
        request, or :meth:`close`): one write per request instead of two. A crash before
        it is written makes the launcher answer an already answered request again, which
        its caller ignores.
        """
        with self._lock:
            if self._live.pop((caller, tag), None) is None:
                return
            self._done.append((caller, tag))
            self._pending.append(f'["-", {int(tag)}, {self._json(caller)}]\n'.encode())
            if flush:
                self._flush()
            if self._size > COMPACT_AT:
                self._compact()

    def flush(self) -> None:
        """Write the finished lines that wait."""
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            data = b''.join(self._pending)
            self._pending.clear()
            self._write(data)
        self._written = self._started

    def _write(self, line: bytes) -> None:
        if self._fd < 0:
            return
        os.write(self._fd, line)
        self._size += len(line)

    def _compact(self) -> None:
        self._pending.clear()  # the rewrite is made from what is live
        data = ''.join(
            [json.dumps(['=', tag, caller]) + '\n' for caller, tag in self._done]
            + [
                json.dumps(['+' if started else 'w', tag, caller, action]) + '\n'
                for (caller, tag), (action, started) in self._live.items()
            ]
        ).encode()
        write_private(self.path, data)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = len(data)
        self._written = self._started

    def close(self) -> None:
        """Close the file; it is removed when nothing is in flight any more."""
        with self._lock:
            if self._fd < 0:
                return
            self._flush()
            os.close(self._fd)
            self._fd = -1
            if not self._live:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)


def _read(path: str) -> list[tuple[tuple[str, int], tuple[str, bool] | None]]:
    """Every request of a journal, in order, with (its action, whether it started) while
    it is unfinished."""
    try:
        with open(path, 'rb') as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    entries: dict[tuple[str, int], tuple[str, bool] | None] = {}
    for line in raw.splitlines():
        try:
            item: Any = json.loads(line)
            key = (str(item[2]), int(item[1]))
            if item[0] in ('+', 'w'):
                entries[key] = (str(item[3]), item[0] == '+')
            elif item[0] == '>':
                live = entries.get(key)
                if live is not None:
                    entries[key] = (live[0], True)
            elif item[0] in ('-', '='):
                entries.pop(key, None)
                entries[key] = None
        except (ValueError, TypeError, IndexError, KeyError):
            logger.warning('skipping a bad line of the journal %s', path)
    return list(entries.items())


def read_lost(path: str) -> list[tuple[str, int, str]]:
    """Read a dead process's journal: ``(caller, tag, action)`` of each request it
    accepted and never finished (see :func:`read_lost_started`)."""
    return [(caller, tag, action) for caller, tag, action, _ in read_lost_started(path)]


def read_lost_started(path: str) -> list[tuple[str, int, str, bool]]:
    """Read a dead process's journal: ``(caller, tag, action, started)`` of each request
    it accepted and never finished (bad lines are skipped); ``started`` is False for a
    request that waited for a free slot and never ran.

    The journal is rewritten with every request it knew of (up to the last 4096) marked
    as seen, for the next incarnation (see :attr:`Journal.seen`), or removed if empty.
    """
    entries = _read(path)
    if not entries:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return []
    data = ''.join(
        json.dumps(['=', tag, caller]) + '\n' for (caller, tag), _ in entries[-_KEEP_SEEN:]
    ).encode()
    try:
        write_private(path, data)
    except OSError:
        logger.warning('could not rewrite the journal %s', path, exc_info=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return [(caller, tag, live[0], live[1]) for (caller, tag), live in entries if live is not None]


def forget(path: str | None) -> None:
    """Remove a journal, and what its process said of its failure (its agent stopped for
    good)."""
    if path is not None:
        for name in (path, f'{path}.failed'):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)


def answer_lost(exchange: Exchange, agent_id: str, path: str, why: str) -> int:
    """Answer each request a dead agent process left unanswered with AgentCrashedError.

    Returns:
        How many callers were answered.
    """
    from tether.agents.message import Response, error_info
    from tether.exceptions import AgentCrashedError, TetherError

    lost = read_lost_started(path)
    answered = 0
    for caller, tag, action, started in lost:
        if started:
            error = AgentCrashedError(
                f'agent {agent_id} died while running action {action!r} of this request '
                f'({why}); the action may have partly run and was not run again',
                True,
            )
        else:
            error = AgentCrashedError(
                f'agent {agent_id} died before it started action {action!r} of this request '
                f'({why}): the request waited for a free slot and did not run; sending it '
                'again is safe',
                False,
            )
        reply = Response(agent_id, caller, tag, error=error_info(error, with_pickle=False))
        try:
            exchange.send(reply)
            answered += 1
        except TetherError as e:
            logger.debug('could not tell %s that agent %s died: %s', caller, agent_id, e)
    if lost:
        logger.warning(
            'agent %s died with %d request(s) in flight; their callers got AgentCrashedError',
            agent_id,
            len(lost),
        )
    return answered
