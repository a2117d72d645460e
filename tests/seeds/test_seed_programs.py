"""Seed programs that live as scripts (run exactly as printed, imports changed)."""

from __future__ import annotations

import runpy
from pathlib import Path

HERE = Path(__file__).parent


def test_seed_figure_3_6_runs() -> None:
    import torch

    from tether.proxy import is_resolved
    from tether.store import get_key

    ns = runpy.run_path(str(HERE / 'fig_3_6.py'), run_name='__main__')
    proxy = ns['proxy']
    store = ns['store']
    assert isinstance(proxy, torch.nn.Module)
    assert is_resolved(proxy)
    assert store.exists(get_key(proxy))
    assert store.config().serializer == '__main__.serialize_torch_model'


def test_seed_figure_3_17_runs() -> None:
    """Figure 3.17: queues proxy values over 100 kB through the registered 'redis' store."""
    import uuid

    import redis

    from tests.steer import _tasks
    from tether.proxy import Proxy
    from tether.steer import LocalTaskServer
    from tether.store import unregister_store
    from tether.testing.steer import serving

    prefix = f'tether-fig317-{uuid.uuid4().hex}'
    ns = runpy.run_path(str(HERE / 'fig_3_17.py'), init_globals={'PREFIX': prefix})
    queue, store = ns['queue'], ns['store']
    try:
        with serving(LocalTaskServer(queue, [_tasks.nbytes, _tasks.make_bytes], 1)):
            queue.send_inputs(b'x' * 200_000, method='nbytes', topic='simulate')
            big = queue.get_result('simulate', timeout=60)
            queue.send_inputs(b'x' * 1000, method='nbytes', topic='simulate')
            small = queue.get_result('simulate', timeout=60)
        assert big.value == 200_000
        assert isinstance(big.args[0], Proxy)
        assert big.message_sizes['inputs'] < 100_000
        assert small.value == 1000
        assert type(small.args[0]) is bytes
    finally:
        queue.flush()
        queue.close()
        client = redis.Redis('127.0.0.1', 6379)
        for key in client.scan_iter(match=f'{prefix}*'):
            client.delete(key)
        client.close()
        store.close()
        unregister_store(store)
