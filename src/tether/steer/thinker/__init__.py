"""Steering policies as agents: :class:`BaseThinker`, its decorators, :class:`ResourceCounter`,
:class:`KindResourceCounter`."""

from __future__ import annotations

from tether.steer.thinker._base import (
    BaseThinker,
    agent,
    event_responder,
    result_processor,
    task_submitter,
)
from tether.steer.thinker._kinds import KindResourceCounter
from tether.steer.thinker.resources import ResourceCounter

__all__ = [
    'BaseThinker',
    'KindResourceCounter',
    'ResourceCounter',
    'agent',
    'event_responder',
    'result_processor',
    'task_submitter',
]
