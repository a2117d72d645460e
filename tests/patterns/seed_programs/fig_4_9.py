# Dissertation figure 4.9: the ownership interface, exercised. Changed: imports.
import os

from tether.connectors.redis import RedisConnector
from tether.store import Store
from tether.store.ref import (
    OwnedProxy,
    RefMutProxy,
    RefProxy,
    borrow,
    clone,
    into_owned,
    mut_borrow,
    update,
)

if __name__ == '__main__':
    with Store('example', RedisConnector(prefix=os.environ['TETHER_SEED_PREFIX'])) as store:
        owned = store.owned_proxy([1])
        assert isinstance(owned, OwnedProxy)
        assert isinstance(into_owned(store.proxy([2])), OwnedProxy)
        ref = borrow(owned)
        assert isinstance(ref, RefProxy)
        del ref
        mut = mut_borrow(owned)
        assert isinstance(mut, RefMutProxy)
        mut.append(2)
        update(mut)
        del mut
        copy = clone(owned)
        assert isinstance(copy, OwnedProxy)
        assert copy == [1, 2]
        update(owned)
