"""The exchange conformance suite of ``tether.testing.agents`` over every tether exchange
(``EXCHANGE_FACTORIES`` in conftest.py), and exchange-specific value handling.

Agents run in threads of this process here, so the suite stays fast; the process, Parsl
and daemon tests run the distributed exchanges across real processes.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents._behaviors import CustomError, Echo
from tether.agents import Manager
from tether.agents.launcher import ThreadLauncher
from tether.agents.message import Response, encode
from tether.exceptions import ActionError, MessageRejectedError
from tether.testing.agents import ExchangeConformance


class TestExchangeConformance(ExchangeConformance):
    """Runs over the parametrized ``exchange`` fixture of conftest.py (every exchange)."""


def test_results_that_cannot_be_sent_become_errors(make_exchange: Any) -> None:
    exchange = make_exchange('redis')
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        with pytest.raises(MessageRejectedError, match='pickled value'):
            handle.echo(CustomError('x')).result(30)
        # The remote exception type is unknown here without pickle: ActionError.
        with pytest.raises(ActionError, match='CustomError: custom failure') as info:
            handle.fail_custom().result(30)
        assert 'raise CustomError' in info.value.remote_traceback


def test_pickle_allowed_when_the_receiver_allows_it(make_exchange: Any) -> None:
    exchange = make_exchange('redis', allow_pickle=True)
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        value = handle.echo(CustomError('x')).result(30)
        assert isinstance(value, CustomError)
        with pytest.raises(CustomError, match='custom failure'):
            handle.fail_custom().result(30)


@pytest.mark.parametrize('kind', ['redis', 'hybrid'])
def test_large_values_travel_by_proxy(make_exchange: Any, kind: str) -> None:
    import numpy as np

    from tether.proxy import Proxy

    exchange = make_exchange(kind, threshold=10_000)
    with Manager(exchange, ThreadLauncher()) as manager:
        handle = manager.launch(Echo())
        array = np.arange(100_000, dtype=np.float64)
        back = handle.echo(array).result(30)
        assert type(back) is Proxy  # lazily resolved through the exchange's store
        assert np.array_equal(back, array)
        assert handle.nbytes(b'y' * 50_000).result(30) == 50_000
        big = handle.make_bytes(200_000).result(30)
        assert big == b'x' * 200_000
        # The message carried a reference, not the data.
        msg = Response('a', 'b', 1, result=b'z' * 100_000)
        assert len(encode(msg, exchange.transport().codec).to_bytes()) < 1_000
