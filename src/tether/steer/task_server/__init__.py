"""Task servers: run the Thinker's requests on a process pool, on Parsl, or on tether.faas."""

from __future__ import annotations

from tether.steer.task_server.base import BaseTaskServer
from tether.steer.task_server.faas import FaaSTaskServer, GlobusComputeTaskServer
from tether.steer.task_server.local import LocalTaskServer
from tether.steer.task_server.parsl import ParslTaskServer

__all__ = [
    'BaseTaskServer',
    'FaaSTaskServer',
    'GlobusComputeTaskServer',
    'LocalTaskServer',
    'ParslTaskServer',
]
