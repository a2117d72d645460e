"""Issue 8 item 16: ``ProxySize`` on small arguments that cannot be pickled.

Objects that cannot be serialized cannot be proxied either: the policy passes them to the
executor as they are (a thread pool takes them), instead of failing the submit.
"""

from __future__ import annotations

import concurrent.futures
import threading

from tether.connectors.local import LocalConnector
from tether.store import Store
from tether.store.executor import ProxyAlways, ProxySize, StoreExecutor


def _is_set(event: threading.Event) -> bool:
    return event.is_set()


def test_size_policy_does_not_proxy_unpicklable() -> None:
    policy = ProxySize(10)
    assert policy.measure(threading.Lock()) == (False, None)
    assert policy(lambda: 1) is False or policy(lambda: 1) is True  # cloudpickle may take it
    assert policy(list(range(100))) is True


def test_unpicklable_arguments_with_a_thread_pool() -> None:
    event = threading.Event()
    event.set()
    with Store('size-policy', LocalConnector()) as store:
        for policy in (ProxySize(10), ProxyAlways()):
            with StoreExecutor(
                concurrent.futures.ThreadPoolExecutor(1), store, policy, close_store=False
            ) as executor:
                assert executor.submit(_is_set, event).result() is True


def test_large_arguments_are_still_proxied() -> None:
    with (
        Store('size-policy-large', LocalConnector()) as store,
        StoreExecutor(
            concurrent.futures.ThreadPoolExecutor(1), store, ProxySize(100), close_store=False
        ) as executor,
    ):
        assert executor.submit(sum, list(range(1000))).result() == 499500
