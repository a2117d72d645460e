# The dissertation's figure 3.10 (ProxyStore with Globus Compute), with only the import
# lines changed and the placeholders filled: '<UUID>' is argv[1], RedisConnector(...)
# names the Redis server and a key prefix (argv[2]).
import sys

from tether.connectors.redis import RedisConnector
from tether.faas import Executor
from tether.store import Store

UUID = sys.argv[1]

with Store('example', RedisConnector('127.0.0.1', 6379, prefix=sys.argv[2])) as store:
    data = store.proxy([1, 2, 3])

    with Executor(UUID) as gce:
        future = gce.submit(sum, data)
        assert future.result() == 6

print('fig 3.10 ok')
