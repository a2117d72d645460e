# Dissertation figure 3.21c. Changed: imports; RedisConnector in place of DAOSConnector.
import os
import sys

from dask.distributed import Client

from tether.connectors.redis import RedisConnector
from tether.store import Store
from tether.store.executor import StoreExecutor

if __name__ == '__main__':
    client = Client()
    connector = RedisConnector(prefix=os.environ['TETHER_SEED_PREFIX'])

    with StoreExecutor(
        client,
        store=Store('example', connector),
        should_proxy=lambda x: sys.getsizeof(x) >= 1000,
    ) as executor:
        future = executor.submit(sum, [1, 2, 3])
        assert future.result() == 6
