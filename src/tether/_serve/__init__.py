"""The server kit: what tether's servers (node, endpoint, relay) and daemons share.

Internal to tether (no promise to users), but any tether package may import it, as it
imports :mod:`tether._wire`. Each module has one job:

* :mod:`~tether._serve.objects` and :mod:`~tether._serve.persistent`: object tables
  (memory budget, LRU spill to disk, optionally every object written through to disk);
* :mod:`~tether._serve.memory`: the memory budget of received frames of an object server;
* :mod:`~tether._serve.requests`: the object requests (PUT, GET, EXISTS, EVICT) against a table;
* :mod:`~tether._serve.codes` and :mod:`~tether._serve.signalling`: the message types of
  the object servers and of the relay's signalling; :mod:`~tether._serve.messages` and
  :mod:`~tether._serve.signalling`: their typed records, one per message kind, checked
  once at decode;
* :mod:`~tether._serve.spawn` and :mod:`~tether._serve.state`: launching a daemon
  detached, its state file, finding and stopping it (node servers, endpoints, and the
  agents' and function service's daemons);
* :mod:`~tether._serve.site`: a data site's configuration (an endpoint's folder);
* :mod:`~tether._serve.sizes`: sizes as users write them (``'4GiB'``);
* :mod:`~tether._serve.tls`: every TLS context tether builds, and self-signed certificates;
* :mod:`~tether._serve.lifecycle`: running a server until it is stopped or signalled;
* :mod:`~tether._serve.loop`: an asyncio event loop running in a thread of its own;
* :mod:`~tether._serve.metrics` and :mod:`~tether._serve.buckets`: Prometheus metrics of a
  server, and the latency buckets of every tether histogram.
"""
