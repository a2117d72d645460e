"""time.proxy by proxy key (Colmena's shape); proxies inside list arguments fetched early."""

from __future__ import annotations

from typing import Any

from tests.steer import _tasks
from tether.steer import LocalTaskServer, PipeQueues
from tether.steer._pack import _SCAN_LIMIT
from tether.store.utils import get_key
from tether.testing.steer import serving


def test_times_by_key_and_nested_proxies_resolve_early(store: Any) -> None:
    queues = PipeQueues(proxystore_name=store.name, proxystore_threshold=1000)
    mine = store.proxy(b'y' * 10)  # made by the user: small, but a proxy
    with serving(LocalTaskServer(queues, [_tasks.first_item_resolving], num_workers=1)):
        queues.send_inputs([mine], method='first_item_resolving')
        in_list = queues.get_result(timeout=60)
        queues.send_inputs({'x': mine}, method='first_item_resolving')
        in_dict = queues.get_result(timeout=60)
        long = [mine] * (_SCAN_LIMIT + 1)
        queues.send_inputs(long, method='first_item_resolving')
        too_long = queues.get_result(timeout=60)
    key = str(get_key(mine))
    # The worker started fetching the proxy inside the list before the method ran.
    assert in_list.value is True
    assert in_list.time.proxy[key]['times']['resolve_async']['count'] == 1
    assert in_list.time.proxy[key]['times']['resolve_async']['seconds'] >= 0
    # In a dict too.
    assert in_dict.value is True
    assert in_dict.time.proxy[key]['times']['resolve_async']['count'] == 1
    # A list longer than the scan limit is not scanned.
    assert too_long.value is False
    assert key not in too_long.time.proxy
