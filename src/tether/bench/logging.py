"""Logging for benchmark runs: :func:`init_logging` (the seed's ``taps.logging``)."""

from __future__ import annotations

import logging
import os
import sys

__all__ = ['RUN_LOG_FORMAT', 'RUN_LOG_LEVEL', 'init_logging', 'remove_logging']

RUN_LOG_FORMAT = '[%(asctime)s.%(msecs)03d] %(levelname)-5s (%(name)s) :: %(message)s'
_DATE_FORMAT = '%Y-%m-%d %H:%M:%S'

RUN_LOG_LEVEL = 22
"""The level of a run's progress messages, between INFO and WARNING (named ``RUN`` once
:func:`init_logging` ran; TaPS's level)."""

_handlers: list[logging.Handler] = []


def _level(level: int | str) -> int:
    if isinstance(level, int):
        return level
    value = logging.getLevelName(level.upper())
    if not isinstance(value, int):
        raise ValueError(f'unknown logging level {level!r}')
    return value


def init_logging(
    logfile: str | os.PathLike[str] | None = None,
    level: int | str = logging.INFO,
    logfile_level: int | str = logging.INFO,
    force: bool = False,
) -> list[logging.Handler]:
    """Send log records to standard error and, if ``logfile`` is given, to that file.

    Configures the root logger (this is meant for scripts and the command line, not for
    library code). Handlers added by an earlier call are removed first; with ``force``,
    every other root handler is removed too.

    Args:
        logfile: File to append records to (its directory is created).
        level: Level of the records written to standard error.
        logfile_level: Level of the records written to ``logfile``.
        force: Remove every handler of the root logger first.

    Returns:
        The handlers added (pass them to :func:`remove_logging` to undo).
    """
    logging.addLevelName(RUN_LOG_LEVEL, 'RUN')
    remove_logging()
    root = logging.getLogger()
    if force:
        for handler in list(root.handlers):
            root.removeHandler(handler)
    formatter = logging.Formatter(RUN_LOG_FORMAT, datefmt=_DATE_FORMAT)
    stream = logging.StreamHandler(sys.stderr)
    stream.setLevel(_level(level))
    stream.setFormatter(formatter)
    added: list[logging.Handler] = [stream]
    if logfile is not None:
        path = os.fspath(logfile)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        file_handler = logging.FileHandler(path)
        file_handler.setLevel(_level(logfile_level))
        file_handler.setFormatter(formatter)
        added.append(file_handler)
    for handler in added:
        root.addHandler(handler)
    lowest = min(h.level for h in added)
    if root.level == logging.NOTSET or root.level > lowest:
        root.setLevel(lowest)
    _handlers.extend(added)
    return added


def remove_logging() -> None:
    """Remove (and close) the handlers :func:`init_logging` added."""
    root = logging.getLogger()
    while _handlers:
        handler = _handlers.pop()
        root.removeHandler(handler)
        handler.close()
