"""Lifetimes: context, lease (extend, done), static; put/proxy(lifetime=)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from tether.connectors.local import LocalConnector
from tether.exceptions import LifetimeError, StoreError
from tether.proxy import Proxy
from tether.store import Store
from tether.store.lifetimes import ContextLifetime, LeaseLifetime, Lifetime, StaticLifetime
from tether.testing import FakeClock, wait_until


def test_context_lifetime_seed_figure_4_10_top(store: Store[Any], keys: Any) -> None:
    with ContextLifetime(store) as lifetime:
        key = store.put('value', lifetime=lifetime)
        proxy = store.proxy('value', lifetime=lifetime)
        assert keys() == 2
        assert proxy == 'value'
    assert not store.exists(key)
    assert keys() == 0
    assert lifetime.done()
    assert isinstance(lifetime, Lifetime)


def test_ended_lifetime_refuses_and_evicts(store: Store[Any], keys: Any) -> None:
    lifetime = ContextLifetime(store)
    lifetime.close()
    lifetime.close()
    with pytest.raises(LifetimeError, match='has ended'):
        store.put('late', lifetime=lifetime)
    assert keys() == 0


def test_add_proxy_and_batch(store: Store[Any], keys: Any) -> None:
    lifetime = ContextLifetime(store)
    plain = store.proxy('a')
    lifetime.add_proxy(plain)
    store.proxy_batch(['b', 'c'], lifetime=lifetime)
    assert keys() == 3
    with pytest.raises(StoreError, match=r'add_proxy.. to a lifetime of a proxy .*not a store'):
        lifetime.add_proxy(Proxy(lambda: 1))
    lifetime.close()
    assert keys() == 0


def test_lease_expires(store: Store[Any], keys: Any) -> None:
    clock = FakeClock()
    lease = LeaseLifetime(store, expiry=0.3, clock=clock)
    key = store.put('value', lifetime=lease)
    clock.wait_for_sleepers(1)  # the lease's timer waits on the clock
    clock.advance(0.29)
    assert not lease.done()
    assert store.exists(key)
    clock.advance(0.01)
    # The lease ends in its own thread once the clock passes its end.
    wait_until(lease.done, interval=0.001, message='the lease to end')
    assert not store.exists(key)
    with pytest.raises(LifetimeError, match='cannot be extended'):
        lease.extend(1)


def test_lease_extend_delays_the_end(store: Store[Any]) -> None:
    clock = FakeClock()
    lease = LeaseLifetime(store, expiry=0.3, clock=clock)
    key = store.put('value', lifetime=lease)
    lease.extend(0.7)
    clock.wait_for_sleepers(1)
    clock.advance(0.5)  # past the first end, not the new one
    assert not lease.done()
    assert store.exists(key)
    clock.advance(0.5)
    # The lease ends in its own thread once the clock passes its end.
    wait_until(lease.done, interval=0.001, message='the lease to end')
    assert not store.exists(key)


def test_lease_until_a_datetime_is_measured_on_the_clock(store: Store[Any]) -> None:
    clock = FakeClock()
    end = datetime.datetime.fromtimestamp(clock.time() + 10, tz=datetime.UTC)
    lease = LeaseLifetime(store, expiry=end, clock=clock)
    clock.wait_for_sleepers(1)
    clock.advance(9)
    assert not lease.done()
    clock.advance(1)
    # The lease ends in its own thread once the clock passes its end.
    wait_until(lease.done, interval=0.001, message='the lease to end')


def test_lease_with_negative_expiry_ends_at_once(store: Store[Any]) -> None:
    # As ProxyStore's: a lease whose end is already past is over, not an error.
    lease = LeaseLifetime(store, expiry=-1)
    assert lease.done()


def test_static_lifetime_is_a_singleton_ending_at_exit() -> None:
    # The singleton lives as long as the test session, so its key's store must too (a
    # store closed first would leave the exit a key it cannot evict, and a warning).
    store: Store[Any] = Store('static-singleton', LocalConnector())
    static = StaticLifetime()
    assert StaticLifetime() is static
    key = store.put('forever', lifetime=static)
    with static:
        pass
    assert not static.done()
    assert store.exists(key)
    with pytest.raises(LifetimeError, match='store='):
        static.add_key(key)


def test_static_lifetime_evicts_at_interpreter_exit(
    redis_client: Any,
    unique_prefix: str,
) -> None:
    import subprocess
    import sys

    code = (
        'from tether.store import Store\n'
        'from tether.connectors.redis import RedisConnector\n'
        'from tether.store.lifetimes import StaticLifetime\n'
        f'store = Store("static-exit", RedisConnector(prefix={unique_prefix!r}))\n'
        'store.put("x", lifetime=StaticLifetime())\n'
        'print(store.exists(store.put("y")))\n'
    )
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == 'True'
    left = list(redis_client.scan_iter(match=f'{unique_prefix}*'))
    assert len(left) == 1  # "y" had no lifetime; "x" was evicted at exit
    redis_client.delete(*left)


def test_done_only_once_the_objects_are_evicted() -> None:
    """A lifetime reports done after its eviction, never while it is still under way."""
    import threading

    from tether.connectors.local import LocalConnector

    evicting, release = threading.Event(), threading.Event()

    class SlowEvict(LocalConnector):
        def evict(self, key: Any) -> None:
            evicting.set()
            assert release.wait(30)
            super().evict(key)

    with Store('slow-evict', SlowEvict()) as slow:
        lifetime = ContextLifetime(slow)
        key = slow.put('value', lifetime=lifetime)
        closer = threading.Thread(target=lifetime.close)
        closer.start()
        assert evicting.wait(30)
        assert not lifetime.done()  # ending has begun, the object is still there
        release.set()
        closer.join(30)
        assert lifetime.done()
        assert not slow.exists(key)
