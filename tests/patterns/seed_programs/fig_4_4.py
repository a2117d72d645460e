# Dissertation figure 4.4, as the seed shows it. Changed: imports; RedisConnector in place
# of FooConnector; `data is 'value'` (always false for a proxy, and a SyntaxWarning) reads
# `data == 'value'`; Client(...) is Client(); the Proxy annotation is imported. Nothing
# else: no target_class= hint, the producer is submitted first and the results are read
# after the store's block, as in the listing.
import os

from dask.distributed import Client

from tether.connectors.redis import RedisConnector
from tether.proxy import Proxy
from tether.store import Store
from tether.store.future import Future


def producer(future: Future[str]) -> None:
    future.set_result('value')


def consumer(data: Proxy[str]) -> None:
    assert data == 'value'


if __name__ == '__main__':
    with Store('example', RedisConnector(prefix=os.environ['TETHER_SEED_PREFIX'])) as store:
        client = Client()
        future: Future[str] = store.future()

        t1 = client.submit(producer, future)
        t2 = client.submit(consumer, future.proxy())

    t1.result(), t2.result()
