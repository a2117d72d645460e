"""Entry points that run one agent in a process of its own (process, Parsl, daemon).

Kept small so that a fork server preloading it holds little memory.
"""

from __future__ import annotations

import logging
import os
import pickle
import sys
from typing import Any

__all__ = ['failure_path', 'read_failure', 'run_agent_bytes', 'run_agent_process']


def run_agent_process(spec: Any) -> None:
    """Run the agent of ``spec`` in this process; exit with status 1 if it fails."""
    from tether.agents._runtime import AgentRuntime

    try:
        AgentRuntime(spec).run()
    except BaseException as e:
        logging.getLogger(__name__).exception('agent %s failed', spec.agent_id)
        if spec.journal is not None:
            # Why, for the launcher: it tells the callers if it gives up on the agent.
            try:
                fd = os.open(
                    failure_path(spec.journal), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600
                )
                os.write(fd, repr(e).encode(errors='replace')[:_MAX_REASON])
                os.close(fd)
            except OSError:
                pass
        sys.stderr.flush()
        os._exit(1)


_MAX_REASON = 2000


def failure_path(journal: str) -> str:
    """The file where an agent process that failed says why (next to its journal)."""
    return f'{journal}.failed'


def read_failure(journal: str | None) -> str | None:
    """Read (and remove) why an agent process failed, if it said so."""
    if journal is None:
        return None
    path = failure_path(journal)
    try:
        with open(path, 'rb') as f:
            text = f.read(_MAX_REASON).decode(errors='replace')
        os.unlink(path)
    except OSError:
        return None
    return text or None


def run_agent_bytes(spec_bytes: bytes) -> str:
    """Run a pickled agent spec here (a Parsl app); raise if the agent fails."""
    from tether.agents._runtime import AgentRuntime

    spec = pickle.loads(spec_bytes)
    AgentRuntime(spec).run()
    return spec.agent_id  # type: ignore[no-any-return]
