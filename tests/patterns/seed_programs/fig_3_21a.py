# Dissertation figure 3.21a. Changed: imports; RedisConnector in place of DAOSConnector.
import os

from dask.distributed import Client

from tether.connectors.redis import RedisConnector
from tether.store import Store

if __name__ == '__main__':
    client = Client()
    connector = RedisConnector(prefix=os.environ['TETHER_SEED_PREFIX'])

    with Store('example', connector) as store:
        proxy = store.proxy([1, 2, 3])
        future = client.submit(sum, proxy)
        assert future.result() == 6
