"""An agent message naming a store key type: only allowlisted key types are imported."""

from __future__ import annotations

import uuid

import pytest

from tether.agents._codec import Codec
from tether.exceptions import MessageRejectedError
from tether.store import Store


def test_a_key_type_outside_the_allowlist_is_refused_before_import() -> None:
    with Store(f'agent-keys-{uuid.uuid4().hex[:8]}') as store:
        codec = Codec(store_getter=lambda: store)
        node = {'R': [store.name, 'tether.connectors.no_such_module.Key', ['x']], 'e': False}
        with pytest.raises(MessageRejectedError, match='not an allowlisted key'):
            codec.decode(node, [])


def test_an_allowlisted_key_type_is_rebuilt() -> None:
    with Store(f'agent-keys-{uuid.uuid4().hex[:8]}') as store:
        codec = Codec(store_getter=lambda: store)
        key = store.put(b'agent bytes')
        node = {'R': [store.name, f'{type(key).__module__}.{type(key).__qualname__}', list(key)]}
        assert codec.decode(node, []) == b'agent bytes'
