"""A behavior whose process dies once (kept in a small module: engines' workers import it)."""

from __future__ import annotations

import os

from tether.agents import Behavior, action


class CrashOnce(Behavior):
    """Its first incarnation's process dies in :meth:`crash`; later ones answer.

    ``marker`` (a file every worker of the host sees) says a crash already happened.
    """

    def __init__(self, marker: str) -> None:
        self.marker = marker

    @action
    def pid(self) -> int:
        return os.getpid()

    @action
    def env(self, name: str) -> str | None:
        return os.environ.get(name)

    @action
    def crash(self) -> str:
        if os.path.exists(self.marker):
            return 'survived'
        open(self.marker, 'w').close()
        os._exit(1)  # the worker process dies with the request in flight
