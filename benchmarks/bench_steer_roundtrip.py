"""The no-op 1 KB task round trip through tether.steer's Redis queues and pool task server.

One worker, keep_inputs=False, 50 warm-up tasks then 300 timed ones, one at a time
(send_inputs then get_result), against the shared Redis at 127.0.0.1:6379 (or a private
one without ``--shared-redis``). Prints the median and writes
``benchmarks/results/bench_steer_roundtrip.json``.

    python benchmarks/bench_steer_roundtrip.py [--shared-redis]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import parse_args, redis_server, summary, write_json


def noop(data: Any) -> None:
    """The task."""


def main() -> None:
    args = parse_args(__doc__)
    from tether.steer import LocalTaskServer, RedisQueues

    with redis_server(args.shared_redis) as port:
        queues = RedisQueues(port=port, prefix=f'rt-{uuid.uuid4().hex}', keep_inputs=False)
        server = LocalTaskServer(queues, [noop], num_workers=1)
        server.start()
        data = b'x' * 1000
        samples = []
        try:
            for i in range(350):
                t0 = time.perf_counter()
                queues.send_inputs(data, method='noop')
                queues.get_result(timeout=60)
                if i >= 50:
                    samples.append(time.perf_counter() - t0)
        finally:
            queues.send_kill_signal()
            server.join()
            queues.flush()
            queues.close()
    print(f'1 KB no-op round trip: median {statistics.median(samples) * 1e3:.2f} ms')
    write_json('bench_steer_roundtrip', {'round_trip': summary(samples)})


if __name__ == '__main__':
    main()
