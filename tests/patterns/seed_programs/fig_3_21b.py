# Dissertation figure 3.21b. Changed: imports; RedisConnector in place of DAOSConnector.
import os

from tether.connectors.redis import RedisConnector
from tether.plugins.dask import Client
from tether.store import Store

if __name__ == '__main__':
    connector = RedisConnector(prefix=os.environ['TETHER_SEED_PREFIX'])

    with Store('example', connector) as store:
        client = Client(ps_store=store, ps_threshold=1000)
        future = client.submit(sum, [1, 2, 3])
        assert future.result() == 6
