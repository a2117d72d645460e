# Dissertation figure 4.10 (both listings). Changed: imports; Store(...) is given a
# RedisConnector; the lease times are scaled down (10 s, +5 s, 20 s -> 1 s, +0.5 s, 2 s).
import os
import time

from tether.connectors.redis import RedisConnector
from tether.store import Store
from tether.store.lifetimes import ContextLifetime, LeaseLifetime

if __name__ == '__main__':
    prefix = os.environ['TETHER_SEED_PREFIX']
    with Store('example', RedisConnector(prefix=prefix)) as store:
        with ContextLifetime(store) as lifetime:
            key = store.put('value', lifetime=lifetime)
            proxy = store.proxy('value', lifetime=lifetime)

        assert not store.exists(key)

    with Store('example', RedisConnector(prefix=prefix)) as store:
        lease = LeaseLifetime(store, expiry=1)

        proxy = store.proxy('value', lifetime=lease)
        lease.extend(0.5)
        time.sleep(2)
        assert lease.done()

        # Object associated with the proxy has been removed
