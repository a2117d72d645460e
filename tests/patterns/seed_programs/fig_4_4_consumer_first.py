# Dissertation figure 4.4 with the two submissions swapped: the consumer is submitted
# before the producer ("T_C can be started before T_P has finished or even started").
# Changed from the listing as in fig_4_4.py (imports, RedisConnector, `data == 'value'`,
# Client()), and the order of the two `client.submit` lines. Submitting the consumer must
# not wait for the future's result: if it did, the producer would never be submitted.
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

        t2 = client.submit(consumer, future.proxy())
        t1 = client.submit(producer, future)

    t1.result(), t2.result()
