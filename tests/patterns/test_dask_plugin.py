"""tether.plugins.dask.Client: a drop-in Dask client with pass-by-proxy over a threshold."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tether.proxy import Proxy
from tether.store import Store

from . import _tasks


@pytest.fixture
def client(dask_cluster: Any, store: Store[Any]) -> Any:
    from tether.plugins.dask import Client

    c = Client(dask_cluster.scheduler_address, ps_store=store, ps_threshold=1000)
    yield c
    c.close()


def _wait_keys(keys: Any, n: int) -> int:
    for _ in range(100):
        if keys() == n:
            break
        time.sleep(0.05)
    return int(keys())


def test_small_objects_pass_by_value(client: Any, keys: Any) -> None:
    assert client.submit(sum, [1, 2, 3]).result() == 6
    assert client.submit(_tasks.type_name, b'x' * 10).result() == 'bytes'
    assert keys() == 0


def test_large_inputs_are_proxied_and_evicted_after_the_task(client: Any, keys: Any) -> None:
    assert client.submit(_tasks.length, b'x' * 5000).result() == 5000
    assert client.submit(_tasks.length, list(range(1000))).result() == 1000
    assert _wait_keys(keys, 0) == 0


def test_large_results_come_back_as_proxies_usable_downstream(client: Any, keys: Any) -> None:
    future = client.submit(_tasks.make_bytes, 5000)
    result = future.result()
    assert isinstance(result, Proxy)
    assert result == b'x' * 5000
    assert client.submit(_tasks.length, future).result() == 5000
    small = client.submit(_tasks.make_bytes, 10).result()
    assert not isinstance(small, Proxy)
    assert keys() > 0  # the result (and its readiness token) live until the client closes
    client.close()
    assert keys() == 0


def test_kwargs_options_and_map(client: Any, keys: Any) -> None:
    future = client.submit(_tasks.set_later, future=None, value=None, pure=False)
    with pytest.raises(AttributeError):
        future.result()
    results = client.gather(client.map(_tasks.length, [b'a' * 2000, b'b', b'c' * 3000]))
    assert results == [2000, 1, 3000]
    keyed = client.map(_tasks.length, [b'a', b'b'], key=['k-a', 'k-b'])
    assert [f.key for f in keyed] == ['k-a', 'k-b']
    assert _wait_keys(keys, 0) == 0


def test_without_store_is_plain_dask(dask_cluster: Any) -> None:
    from tether.plugins.dask import Client

    with Client(dask_cluster.scheduler_address) as c:
        assert c.submit(sum, [1, 2]).result() == 3
        assert c.gather(c.map(len, [[1], [1, 2]])) == [1, 2]
