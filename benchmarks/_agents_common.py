"""Behaviors and actor classes shared by benchmarks/bench_agents.py (importable by the
agent processes it starts)."""

from __future__ import annotations

import os
from typing import Any

from tether.agents import Behavior, action


class Echo(Behavior):
    """Returns a new object of its argument's size (data moves both ways)."""

    max_concurrency = 1

    @action
    def echo(self, data: Any) -> bytes:
        return bytes(data)

    @action
    def noop(self) -> None:
        return None

    @action
    def pid(self) -> int:
        return os.getpid()


class RayDaskEcho:
    """The same actor for Ray and Dask."""

    def echo(self, data: Any) -> bytes:
        return bytes(data)

    def noop(self) -> None:
        return None

    def pid(self) -> int:
        return os.getpid()
