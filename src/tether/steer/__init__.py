"""Steering AI-guided campaigns: a Thinker, task queues with proxies, and task servers.

```python
from tether.steer import BaseThinker, KindResourceCounter, ResourceCounter, agent
from tether.steer.queue import PipeQueues
from tether.steer.task_server import LocalTaskServer
```

See ``docs/steer.md``.
"""

from __future__ import annotations

from tether.exceptions import KillSignalError, SteerTimeoutError
from tether.steer.methods import ExecutableMethod
from tether.steer.models import (
    FailureInformation,
    ResourceRequirements,
    Result,
    SerializationMethod,
)
from tether.steer.queue import PipeQueues, RedisQueues
from tether.steer.task_server import LocalTaskServer, ParslTaskServer
from tether.steer.thinker import (
    BaseThinker,
    KindResourceCounter,
    ResourceCounter,
    agent,
    event_responder,
    result_processor,
    task_submitter,
)

# The names Colmena users know for the same errors.
TimeoutException = SteerTimeoutError
KillSignalException = KillSignalError

__all__ = [
    'BaseThinker',
    'ExecutableMethod',
    'FailureInformation',
    'KillSignalException',
    'KindResourceCounter',
    'LocalTaskServer',
    'ParslTaskServer',
    'PipeQueues',
    'RedisQueues',
    'ResourceCounter',
    'ResourceRequirements',
    'Result',
    'SerializationMethod',
    'TimeoutException',
    'agent',
    'event_responder',
    'result_processor',
    'task_submitter',
]
