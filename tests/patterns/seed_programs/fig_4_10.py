# Dissertation figure 4.10 (both listings). Changed: imports; Store(...) is given a
# RedisConnector; the lease runs on a tether.testing.FakeClock, advanced past its end
# (10 s, +5 s) instead of slept past it (time.sleep(20)); the lease ends and evicts in its
# own thread, so the program waits (bounded) for its object to be gone; added: checks
# that it has not ended before its extended end, and that the object was removed.
import os
import time

from tether.connectors.redis import RedisConnector
from tether.proxy import get_factory
from tether.store import Store
from tether.store.lifetimes import ContextLifetime, LeaseLifetime
from tether.testing import FakeClock

if __name__ == '__main__':
    prefix = os.environ['TETHER_SEED_PREFIX']
    with Store('example', RedisConnector(prefix=prefix)) as store:
        with ContextLifetime(store) as lifetime:
            key = store.put('value', lifetime=lifetime)
            proxy = store.proxy('value', lifetime=lifetime)

        assert not store.exists(key)

    with Store('example', RedisConnector(prefix=prefix)) as store:
        clock = FakeClock()
        lease = LeaseLifetime(store, expiry=10, clock=clock)

        proxy = store.proxy('value', lifetime=lease)
        lease.extend(5)
        clock.wait_for_sleepers(1)  # the lease's timer waits on the clock
        clock.advance(14)
        assert not lease.done()
        clock.advance(6)
        key = get_factory(proxy).key
        deadline = time.monotonic() + 60
        while store.exists(key) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lease.done()

        # Object associated with the proxy has been removed
        assert not store.exists(key)
