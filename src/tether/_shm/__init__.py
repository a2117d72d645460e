"""The shared-memory slot kit: one slot design under every shared-memory path of tether.

Internal to tether (no promise to users), but any tether package may import it, as it
imports :mod:`tether._wire` and :mod:`tether._serve`. A *slot* is a piece of shared
memory that a process writes a value into and other processes of the host map; it is
rounded up to a size class and reused, because fresh pages (allocated and zeroed by the
kernel on first touch) cost more than the copy itself. One design, in one place:

* :mod:`~tether._shm.pool`: the size classes (powers of two, :func:`~tether._shm.pool.size_class`),
  the byte budget (:func:`~tether._shm.pool.fits`), and :class:`~tether._shm.pool.SlotPool`:
  the free slots of one process by size class, a budget of bytes kept and in use (a
  slot past it is a :class:`~tether.exceptions.ConnectorError` that says so), idle slots
  trimmed, a forked child starting empty;
* :mod:`~tether._shm.maps`: the mappings a process keeps of slots
  (:class:`~tether._shm.maps.MappingCache`: least recently used out, bounded by count and
  bytes, forgotten in a forked child), and the copies into and out of them.

Two backings, because two uses need opposite lifetimes:

* :mod:`~tether._shm.memfd`, *anonymous*: a ``memfd`` of the writing process, that
  another process of the same user and PID namespace opens through
  ``/proc/<pid>/fd/<fd>`` (no file-descriptor passing: the reference is a few integers
  in a message). It dies with its process, so a killed process leaks nothing. The hybrid
  agent exchange sends large values through it: the sender owns the slot and reuses it
  once the message is acknowledged.
* :mod:`~tether._shm.named`, *named*: a file in ``/dev/shm`` with a header and ``flock``
  rules, that any process of the host opens by name, after its writer exited too. The
  shared-memory connector's objects need that (a key is a name that outlives its
  writer); free segments wait in a pool directory shared by the processes of a
  namespace, under the same size classes and a byte budget.
"""
