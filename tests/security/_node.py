"""Node servers as real processes for the security tests (unique names, private dirs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.node.conftest import SECRET, RunningNode

__all__ = ['SECRET', 'RunningNode', 'StartNode', 'start_node']

StartNode = Callable[..., RunningNode]


@pytest.fixture
def start_node(tmp_path: Path) -> Iterator[StartNode]:
    """Start ``python -m tether.node start`` processes; stop them after the test."""
    nodes: list[RunningNode] = []

    def start(*args: str, **kwargs: Any) -> RunningNode:
        node = RunningNode(tmp_path, *args, **kwargs)
        nodes.append(node)
        return node

    yield start
    for node in nodes:
        node.stop()
