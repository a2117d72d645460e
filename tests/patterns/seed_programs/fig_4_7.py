# Dissertation figure 4.7. Changed: imports; Store(...) is given a RedisConnector; the
# object is [1, 2, 3] (the seed's 'value' cannot be sum()med to 6).
import os
from concurrent.futures import ProcessPoolExecutor

from tether.connectors.redis import RedisConnector
from tether.store import Store
from tether.store.ref import borrow
from tether.store.scopes import submit

if __name__ == '__main__':
    connector = RedisConnector(prefix=os.environ['TETHER_SEED_PREFIX'])
    with Store('example', connector) as store, ProcessPoolExecutor() as pool:
        proxy = store.owned_proxy([1, 2, 3])
        borrowed = borrow(proxy)

        future = submit(pool.submit, args=(sum, borrowed))
        assert future.result() == 6
        # Task is completed so the owned proxy is no longer borrowed

        # Owned proxy is safe to delete or be garbage collected
        del proxy
