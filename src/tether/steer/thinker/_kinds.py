"""Slots of several worker kinds (sites, partitions), each counted on its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from tether.exceptions import ConfigError
from tether.steer.thinker.resources import ResourceCounter

__all__ = ['KindResourceCounter']


class KindResourceCounter(ResourceCounter):
    """A :class:`ResourceCounter` whose slots are of several kinds that never mix.

    Each kind (a site, an endpoint, a partition: CPU nodes at one place, GPUs at
    another) has its own slots, and each task pool draws on one kind: slots move
    between pools of the same kind only. ``None``, the unallocated pool, is per kind:
    ``reallocate(None, 'train', 2)`` takes two unallocated slots of ``train``'s kind.
    Where a call names no pool (``None`` only) and there are several kinds, give the
    kind with :meth:`unallocated` or name a pool. Everything else is
    :class:`ResourceCounter`'s API, so Thinkers, task submitters and
    :class:`~tether.steer.thinker.resources.ReallocatorThread` use it unchanged.

    Args:
        kinds: Slots of each kind, e.g. ``{'site-a': 8, 'site-b': 2}``.
        task_types: The kind of each pool, e.g. ``{'simulate': 'site-a', 'train':
            'site-b', 'infer': 'site-b'}``.
    """

    def __init__(self, kinds: Mapping[str, int], task_types: Mapping[str, str]) -> None:
        if not isinstance(kinds, Mapping) or not kinds:
            raise ConfigError('kinds must map at least one kind name to its slots')
        if not isinstance(task_types, Mapping):
            raise ConfigError('task_types must map each pool name to its kind')
        for kind, slots in kinds.items():
            if not isinstance(slots, int) or slots < 0:
                raise ConfigError(f'kind {kind!r}: slots must be an int >= 0, not {slots!r}')
        for pool, kind in task_types.items():
            if kind not in kinds:
                raise ConfigError(
                    f'pool {pool!r} is of unknown kind {kind!r}; kinds: {list(kinds)}'
                )
        super().__init__(sum(kinds.values()), ())
        self._kind_of = dict(task_types)
        self._kinds = {
            k: ResourceCounter(n, [p for p, pk in task_types.items() if pk == k])
            for k, n in kinds.items()
        }

    def __repr__(self) -> str:
        inner = '; '.join(f'{k}: {c!r}' for k, c in self._kinds.items())
        return f'KindResourceCounter({inner})'

    @property
    def kinds(self) -> dict[str, int]:
        """Slots of each kind."""
        return {k: c.total_slots for k, c in self._kinds.items()}

    def kind_of(self, task: str) -> str:
        """The kind of pool ``task``."""
        if task not in self._kind_of:
            raise ConfigError(f'unknown task pool {task!r}; pools: {list(self._kind_of)}')
        return self._kind_of[task]

    def unallocated(self, kind: str) -> int:
        """Unallocated slots of ``kind``."""
        return self._counter(kind=kind).unallocated_slots

    def _counter(self, task: str | None = None, *, kind: str | None = None) -> ResourceCounter:
        if kind is None:
            if task is not None:
                kind = self.kind_of(task)
            elif len(self._kinds) == 1:
                kind = next(iter(self._kinds))
            else:
                raise ConfigError(
                    f'pool None is ambiguous with several kinds ({list(self._kinds)}): '
                    'name a pool (or use unallocated(kind))'
                )
        if kind not in self._kinds:
            raise ConfigError(f'unknown kind {kind!r}; kinds: {list(self._kinds)}')
        return self._kinds[kind]

    @property
    def task_types(self) -> list[str]:
        """Names of the pools."""
        return list(self._kind_of)

    def _sum(self, task: str | None, what: Callable[[ResourceCounter], int]) -> int:
        if task is None and len(self._kinds) > 1:
            return sum(what(c) for c in self._kinds.values())
        return what(self._counter(task))

    def allocated_slots(self, task: str | None) -> int:
        """Slots given to ``task``'s pool (``None``: unallocated slots of every kind)."""
        return self._sum(task, lambda c: c.allocated_slots(task))

    def available_slots(self, task: str | None) -> int:
        """Slots of ``task``'s pool not acquired (``None``: of every kind)."""
        return self._sum(task, lambda c: c.available_slots(task))

    def active_slots(self, task: str | None) -> int:
        """Slots of ``task``'s pool acquired (tasks running)."""
        return self._sum(task, lambda c: c.active_slots(task))

    def _counter_of(self, *tasks: str | None) -> ResourceCounter:
        # The counter of these pools' kind (acquire, release and reallocate use it).
        named = [(t, self.kind_of(t)) for t in tasks if t is not None]
        kinds = {k for _, k in named}
        if len(kinds) > 1:
            (a, ka), (b, kb) = named
            raise ConfigError(
                f'pool {a!r} holds {ka!r} slots and pool {b!r} {kb!r} slots: '
                'slots do not move between kinds'
            )
        return self._counter(kind=kinds.pop() if kinds else None)
