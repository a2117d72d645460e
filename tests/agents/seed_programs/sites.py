"""Run the seed's figure 5.5 and 5.6 programs across sites: only their configuration changes.

``fig_5_5.py`` and ``fig_5_6.py`` run unchanged. Their configuration is the exchange the
figure builds (its ``ThreadExchange()``: "can be swapped with other implementations"),
which this runner binds to a hosted exchange (``tether agents exchange serve``) with a
store of tether endpoints for large values, all read from the environment:

``TETHER_EXCHANGE_URL``
    The hosted exchange (``wss://host:port``).
``TETHER_EXCHANGE_TOKEN``
    The user's token (read by :class:`~tether.agents.exchange.HttpExchange` itself).
``TETHER_EXCHANGE_CA``
    The exchange's certificate (or its authority) to trust (optional).
``TETHER_AGENTS_ENDPOINTS``
    Comma-separated tether endpoint names (of ``$TETHER_HOME``): values above the
    threshold travel by proxy through them (optional: without it, values go inline).
``TETHER_AGENTS_THRESHOLD``
    Bytes above which a value goes by proxy (default 100000).

Commands (``python -m tests.agents.seed_programs.sites COMMAND``):

``fig_5_6``
    Run the figure 5.6 program here.
``agent``
    Serve figure 5.5's ``Example`` behavior here, as an agent of this user; print its id
    as JSON, and stop when standard input closes.
``thinker SIZE``
    The client at the thinker's place: find two ``Example`` agents, square an array of
    ``SIZE`` bytes at the first, pass the (unresolved) result to the second, and print
    what came back as JSON.
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import sys
from collections.abc import Iterator
from typing import Any

import tether.agents.exchange as exchange_module
from tether.agents.exchange import HttpExchange

__all__ = ['configured', 'configured_exchange', 'main']

STORE_NAME = 'seed-sites'


def configured_exchange() -> HttpExchange:
    """The exchange the environment configures (see the module's docstring)."""
    url = os.environ['TETHER_EXCHANGE_URL']
    store = None
    names = [n for n in os.environ.get('TETHER_AGENTS_ENDPOINTS', '').split(',') if n]
    if names:
        from tether.connectors.endpoint import EndpointConnector
        from tether.store import Store, get_store

        store = get_store(STORE_NAME) or Store(STORE_NAME, EndpointConnector(names, timeout=60))
    threshold = int(os.environ.get('TETHER_AGENTS_THRESHOLD', '100000'))
    return HttpExchange(
        url, ca_file=os.environ.get('TETHER_EXCHANGE_CA'), store=store, threshold=threshold
    )


@contextlib.contextmanager
def configured() -> Iterator[list[HttpExchange]]:
    """Make ``ThreadExchange()`` build the configured exchange (and close what it made)."""
    made: list[HttpExchange] = []
    original = exchange_module.ThreadExchange

    def factory(*args: Any, **kwargs: Any) -> HttpExchange:
        made.append(configured_exchange())
        return made[-1]

    exchange_module.ThreadExchange = factory  # type: ignore[assignment,misc]
    try:
        yield made
    finally:
        exchange_module.ThreadExchange = original  # type: ignore[misc]
        for exchange in made:
            exchange.close()


def _agent() -> None:
    from tests.agents.seed_programs.fig_5_5 import Example

    from tether.agents import Manager
    from tether.agents.launcher import ThreadLauncher

    exchange = configured_exchange()
    try:
        with Manager(exchange, ThreadLauncher()) as manager:
            handle = manager.launch(Example())
            print(json.dumps({'agent_id': handle.agent_id, 'user': exchange.user}), flush=True)
            sys.stdin.read()  # until the site's operator (the test) closes it
    finally:
        exchange.close()


def _thinker(size: int) -> None:
    import numpy as np
    from tests.agents.seed_programs.fig_5_5 import Example

    from tether.proxy import Proxy, is_resolved

    exchange = configured_exchange()
    try:
        found = exchange.discover(Example)
        if len(found) != 2:
            raise SystemExit(f'expected two Example agents, found {found}')
        first, second = (exchange.get_handle(a) for a in found)
        value = np.arange(size // 8, dtype=np.float64) % 7
        squared = first.square(value).result(120)
        by_proxy = isinstance(squared, Proxy) and not is_resolved(squared)
        fourth = second.square(squared).result(120)  # the proxy travels unresolved
        out = {
            'agents': found,
            'first_by_proxy': by_proxy,
            'first_resolved_here': is_resolved(squared) if isinstance(squared, Proxy) else True,
            'ok': bool(np.array_equal(np.asarray(fourth), value**4)),
            'nbytes': int(np.asarray(fourth).nbytes),
        }
        print(json.dumps(out), flush=True)
    finally:
        exchange.close()


def main(argv: list[str]) -> int:
    """Run one command (see the module's docstring)."""
    command = argv[0] if argv else ''
    if command == 'fig_5_6':
        with configured() as made:
            runpy.run_module('tests.agents.seed_programs.fig_5_6', run_name='__main__')
        print(json.dumps({'exchanges': [type(e).__name__ for e in made]}), flush=True)
    elif command == 'agent':
        _agent()
    elif command == 'thinker':
        _thinker(int(argv[1]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
