"""Queues between the Thinker and the task server: on one machine, or through Redis.

```python
from tether.steer.queue import RedisQueues

queues = RedisQueues(topics=['simulate'], prefix=unique_prefix,
                     proxystore_name='redis', proxystore_threshold=100_000)
```
"""

from __future__ import annotations

from tether.steer.queue.base import BaseQueues, ColmenaQueues
from tether.steer.queue.python import PipeQueues
from tether.steer.queue.redis import RedisQueues

__all__ = ['BaseQueues', 'ColmenaQueues', 'PipeQueues', 'RedisQueues']
