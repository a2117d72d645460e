# Dissertation figure 4.8. Changed: imports; Store(...) is given a RedisConnector;
# ProxyType(list) reads ProxyType(list, int): the seed asserts the int result is a proxy,
# which a list-only policy would not make.
import os
from concurrent.futures import ProcessPoolExecutor

from tether.connectors.redis import RedisConnector
from tether.proxy import Proxy
from tether.store import Store
from tether.store.executor import ProxyType, StoreExecutor

if __name__ == '__main__':
    with StoreExecutor(
        ProcessPoolExecutor(),
        store=Store('example', RedisConnector(prefix=os.environ['TETHER_SEED_PREFIX'])),
        ownership=True,
        # Only proxy objects of type list
        should_proxy=ProxyType(list, int),
    ) as executor:
        future = executor.submit(sum, [1, 2, 3])
        result = future.result()

        assert isinstance(result, Proxy)
        assert result == 6
