"""The Store: put, get and proxy Python objects through a connector.

from tether.connectors.redis import RedisConnector
from tether.store import Store

with Store('my-store', RedisConnector('localhost', 6379), register=True) as store:
    p = store.proxy(big_array)      # stores the array, returns a small proxy
    task(p)                         # any process resolves p on first use
"""

from __future__ import annotations

from tether.store._registration import store_registration
from tether.store._registry import (
    get_or_create_store,
    register_store,
    unregister_store,
)
from tether.store._store import Store
from tether.store.config import StoreConfig
from tether.store.factory import StoreFactory
from tether.store.utils import get_key, get_store

__all__ = [
    'Store',
    'StoreConfig',
    'StoreFactory',
    'get_key',
    'get_or_create_store',
    'get_store',
    'register_store',
    'store_registration',
    'unregister_store',
]
