"""Test helpers for tether and for code built on it: servers, conformance suites, threads.

* :mod:`tether.testing.servers`: throwaway servers on free loopback ports
  (:class:`ServerProcess`, :class:`RedisServer`, :func:`redis_server_fixture`), for tests
  that stop, restart or inspect a server without touching a shared one.
* :class:`FakeClock`: a clock that moves only when the test advances it, for code that
  takes ``clock=`` (lifetimes, futures, agent timers, retries).
* :func:`wait_until`: poll a condition until it holds or a deadline passes, failing the
  test with a message that says what it waited for.
* :mod:`tether.testing.threads`: :func:`hammer` and :func:`hammer_object` call code from
  many threads at once and report every failure.
* :mod:`tether.testing.connectors`: the connector conformance suite, to run against any
  connector (a base class to subclass in a test module).
* :mod:`tether.testing.stream`: the stream shim conformance suite, likewise.
* :mod:`tether.testing.agents`: the agent exchange conformance suite, likewise.

The three suites are pytest test classes and need pytest (``pip install
"tether[testing]"``); importing :mod:`tether.testing` itself does not, nor do the
servers and threads helpers (:func:`redis_server_fixture` imports pytest when called).
See ``docs/testing.md``.
"""

from __future__ import annotations

from tether._clock import FakeClock
from tether.testing._waiting import wait_until
from tether.testing.servers import (
    RedisServer,
    ServerProcess,
    free_port,
    port_open,
    redis_server_fixture,
)
from tether.testing.threads import HammerFailure, HammerReport, hammer, hammer_object

__all__ = [
    'FakeClock',
    'HammerFailure',
    'HammerReport',
    'RedisServer',
    'ServerProcess',
    'free_port',
    'hammer',
    'hammer_object',
    'port_open',
    'redis_server_fixture',
    'wait_until',
]
