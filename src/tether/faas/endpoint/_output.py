"""Capture of a task's stdout and stderr in its worker (bounded, sent with the result).

A worker points its file descriptors 1 and 2 at two temporary files while a task runs
(so the output of C extensions and of subprocesses the task starts is captured too, not
only ``print``), then puts them back. Only when a task wrote something are the files read
(at most ``max_output_bytes`` of each stream: its first and last halves, the cut marked)
and emptied: a task that writes nothing costs six system calls.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from typing import Any

__all__ = ['DEFAULT_MAX_OUTPUT', 'MAX_OUTPUT_LIMIT', 'OutputCapture', 'clip_output']

DEFAULT_MAX_OUTPUT = 64 * 1024
"""Bytes of each stream kept by default (the endpoint's ``max_output_bytes``)."""

MAX_OUTPUT_LIMIT = 128 * 1024
"""The largest ``max_output_bytes``: both streams, with the task's error, must fit in one
result message's header (512 KiB)."""

# The JSON form of the kept text (how it travels) may be at most this many times the
# limit: text of control characters or non-ASCII letters grows up to sixfold when escaped.
_ESCAPED = 1.25


def clip_output(data: bytes, limit: int) -> str:
    """``data`` as text, at most ``limit`` bytes of it: its first and last halves around
    a ``[... N bytes cut ...]`` line when it is longer (and shorter still if its JSON
    form would exceed 1.25 times the limit)."""
    if len(data) <= limit:
        return _clip(data, b'', 0, limit)
    half = limit // 2
    return _clip(data[:half], data[len(data) - (limit - half) :], len(data) - limit, limit)


def _clip(head_bytes: bytes, tail_bytes: bytes, cut: int, limit: int) -> str:
    head = head_bytes.decode('utf-8', 'replace')
    tail = tail_bytes.decode('utf-8', 'replace')
    size = len(json.dumps(head + tail))
    while size > _ESCAPED * limit and (head or tail):  # escaped text grows: keep less
        keep = min(int(len(head + tail) * _ESCAPED * limit / size), len(head + tail) - 1)
        before = len((head + tail).encode())
        if tail:
            head, tail = head[: keep // 2], tail[len(tail) - (keep - keep // 2) :]
        else:
            head, tail = head[: keep // 2], head[len(head) - (keep - keep // 2) :]
        cut += before - len((head + tail).encode())
        size = len(json.dumps(head + tail))
    if not cut:
        return head + tail
    return f'{head}\n[... {cut} bytes cut ...]\n{tail}'


class OutputCapture:
    """The stdout and stderr of one task at a time, in one worker process.

    Args:
        limit: Bytes of each stream kept (0: no capture; the output goes where the
            worker's own does).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._files: list[int] = []
        self._saved: list[int] = []
        # sys.stdout and sys.stderr while a task runs, when the host replaced them with
        # streams that do not write to descriptors 1 and 2 (as pytest does): text
        # streams on descriptors 1 and 2; and the streams they stand in for.
        self._texts: list[Any] = []
        self._swapped: list[Any] = []

    def start(self) -> None:
        """Point descriptors 1 and 2 at this capture's files."""
        if self.limit <= 0:
            return
        if not self._files:
            for _ in (1, 2):
                fd, path = tempfile.mkstemp(prefix='tether-task-output-')
                os.unlink(path)
                self._files.append(fd)
            self._saved = [os.dup(1), os.dup(2)]
        _flush()
        os.dup2(self._files[0], 1)
        os.dup2(self._files[1], 2)
        if _fileno(sys.stdout) != 1 or _fileno(sys.stderr) != 2:
            if not self._texts:  # share the descriptors' offsets: one file each
                self._texts = [
                    open(fd, 'w', encoding='utf-8', errors='replace', closefd=False)  # noqa: SIM115
                    for fd in (1, 2)
                ]
            self._swapped = [sys.stdout, sys.stderr]
            sys.stdout, sys.stderr = self._texts

    def stop(self) -> dict[str, str] | None:
        """Put descriptors 1 and 2 back; ``{'stdout': ..., 'stderr': ...}`` with the
        streams the task wrote to (``None``: it wrote nothing)."""
        if self.limit <= 0 or not self._files:
            return None
        _flush()
        if self._swapped:
            sys.stdout, sys.stderr = self._swapped
            self._swapped = []
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        output: dict[str, str] | None = None
        for name, fd in zip(('stdout', 'stderr'), self._files, strict=True):
            size = os.lseek(fd, 0, os.SEEK_CUR)
            if size:
                if output is None:
                    output = {}
                output[name] = _read(fd, size, self.limit)
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
        return output


def _read(fd: int, size: int, limit: int) -> str:
    """The kept text of a file of ``size`` bytes: all of it, or its first and last
    ``limit / 2`` bytes (the rest is never read)."""
    if size <= limit:
        return _clip(os.pread(fd, size, 0), b'', 0, limit)
    half = limit // 2
    head = os.pread(fd, half, 0)
    tail = os.pread(fd, limit - half, size - (limit - half))
    return _clip(head, tail, size - limit, limit)


def _fileno(stream: Any) -> int | None:
    try:
        return int(stream.fileno())
    except Exception:  # no descriptor (io.StringIO, pytest's capture)
        return None


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()
