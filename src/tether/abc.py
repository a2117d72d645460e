"""The contracts of tether's seams, gathered in one place.

Each contract is defined next to its subsystem (in a public module there) and named here
too, so that whoever adds an implementation finds every seam, what it must provide, and
the conformance suite in :mod:`tether.testing` that checks it.

Agents (:mod:`tether.agents`):

* :class:`AgentExchange` (``tether.agents.exchange.Exchange``): hosts mailboxes; implement
  ``key()`` and ``make_transport()``. Suite: ``tether.testing.agents.ExchangeConformance``.
* :class:`AgentTransport` (``tether.agents.exchange.Transport``) and
  :class:`AgentListener` (``tether.agents.exchange.Listener``): what an exchange's
  transport implements in each process.
* :class:`AgentLauncher` (``tether.agents.launcher.Launcher``): runs agents; implement
  ``run_once()`` (and ``kill()``). Suite: ``tether.testing.agents.LauncherConformance``.

Function service (:mod:`tether.faas`):

* :class:`FaasEngine` (``tether.faas.endpoint.engine.Engine``): runs a compute endpoint's
  tasks on workers, reporting through its declared ``on_handoff``/``on_result``
  callbacks; chosen by name from ``register_engine()`` or the ``tether.faas_engines``
  entry points. Suite: ``tether.testing.faas.EngineConformance``.
"""

from __future__ import annotations

from tether.agents.exchange import Exchange as AgentExchange
from tether.agents.exchange import Listener as AgentListener
from tether.agents.exchange import Transport as AgentTransport
from tether.agents.launcher import Launcher as AgentLauncher
from tether.faas.endpoint.engine import Engine as FaasEngine

__all__ = [
    'AgentExchange',
    'AgentLauncher',
    'AgentListener',
    'AgentTransport',
    'FaasEngine',
]
