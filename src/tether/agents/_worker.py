"""Entry points that run one agent in a process of its own (process, Parsl, daemon).

Kept small so that a fork server preloading it holds little memory.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from typing import Any

__all__ = ['run_agent_bytes', 'run_agent_process']


def run_agent_process(spec: Any) -> None:
    """Run the agent of ``spec`` in this process; exit with status 1 if it fails."""
    from tether.agents._runtime import AgentRuntime

    try:
        AgentRuntime(spec).run()
    except BaseException:
        logging.getLogger(__name__).exception('agent %s failed', spec.agent_id)
        sys.stderr.flush()
        os._exit(1)


def run_agent_bytes(spec_bytes: bytes) -> str:
    """Run a pickled agent spec here (a Parsl app); raise if the agent fails."""
    from tether.agents._runtime import AgentRuntime

    spec = pickle.loads(spec_bytes)
    AgentRuntime(spec).run()
    return spec.agent_id  # type: ignore[no-any-return]
