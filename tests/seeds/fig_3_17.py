# Figure 3.17 of the dissertation (ProxyStore within Colmena queues), with the imports
# changed to tether and the elisions ("...") filled in for a machine-local Redis. The
# test runs it with PREFIX (a unique key prefix) given; the rest is the figure's.
# ruff: noqa: I001, F821
# fmt: off
from tether.steer.queue import RedisQueues
from tether.connectors.redis import RedisConnector
from tether.store import Store

store = Store('redis', RedisConnector('127.0.0.1', 6379, prefix=PREFIX), register=True)

queue = RedisQueues(
    topics=['simulate'], prefix=PREFIX,
    proxystore_name='redis',
    proxystore_threshold=100000,
)
