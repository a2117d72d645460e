"""Tie the borrows passed to a task to the task's future, for any executor.

Execution engines each have their own ``submit``; :func:`submit` wraps any of them. It
finds the :class:`~tether.store.ref.RefProxy` and :class:`~tether.store.ref.RefMutProxy`
among the arguments (also inside lists, tuples, sets and dicts), calls ``submit_fn``, and
ends those borrows when the returned future completes, so the owner can then be dropped
or mutated::

    proxy = store.owned_proxy([1, 2, 3])
    future = submit(pool.submit, args=(sum, borrow(proxy)))
    assert future.result() == 6
    del proxy                           # not borrowed any more: evicts the object
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol, TypeVar, runtime_checkable

from tether.store.ref import OwnedProxy, RefProxy, drop, end_borrow

__all__ = ['FutureWithCallback', 'mark_refs_out_of_scope', 'submit']

logger = logging.getLogger(__name__)

FutureT = TypeVar('FutureT')


@runtime_checkable
class FutureWithCallback(Protocol):
    """A future that runs callbacks when done (what :func:`submit` needs of the future
    ``submit_fn`` returns): :class:`concurrent.futures.Future`, asyncio futures, Dask's."""

    def add_done_callback(self, fn: Callable[[Any], Any], /) -> None:
        """Call ``fn(future)`` once the future is done."""
        ...


def mark_refs_out_of_scope(*refs: Any) -> None:
    """End each borrow and drop each owner among ``refs`` now (duplicates once).

    ProxyStore's name for what :func:`submit` does when a task is done: borrows end
    (their owners may then be mutated or dropped) and owners evict their objects.

    Raises:
        OwnershipError: if an owner among ``refs`` is still borrowed (by a borrow not
            among ``refs``), moved or dropped already.
    """
    seen: set[int] = set()
    owners: list[OwnedProxy[Any]] = []
    for ref in refs:
        if id(ref) in seen:
            continue
        seen.add(id(ref))
        kind = type(ref)  # not isinstance(): it could resolve a plain proxy
        if issubclass(kind, RefProxy):
            end_borrow(ref)
        elif issubclass(kind, OwnedProxy):
            owners.append(ref)
    for owner in owners:  # after the borrows, which may be of these owners
        drop(owner)


def _find_refs(obj: Any, found: list[RefProxy[Any]], depth: int = 0) -> None:
    # type() checks: isinstance() on a plain proxy of unknown class would resolve it (and
    # a future's proxy would wait for its result).
    kind = type(obj)
    if issubclass(kind, RefProxy):
        found.append(obj)
        return
    if depth > 4:
        return
    if kind in (list, tuple, set, frozenset):
        for item in obj:
            _find_refs(item, found, depth + 1)
    elif kind is dict:
        for item in obj.values():
            _find_refs(item, found, depth + 1)


def _release_all(refs: Iterable[RefProxy[Any]]) -> None:
    for ref in refs:
        end_borrow(ref)


def submit(
    submit_fn: Callable[..., FutureT],
    *,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    register_custom_refs: Iterable[Any] = (),
) -> FutureT:
    """Call ``submit_fn(*args, **kwargs)`` and end the borrows among them when it is done.

    Args:
        submit_fn: The engine's submit (``pool.submit``, ``client.submit`` ...); it must
            return a future with ``add_done_callback`` (concurrent, Dask, Parsl futures).
        args: Positional arguments for ``submit_fn`` (usually the function first).
        kwargs: Keyword arguments for ``submit_fn``.
        register_custom_refs: More borrows to end with the task (ones the search of the
            arguments cannot see, e.g. inside custom objects).

    Returns:
        The future ``submit_fn`` returned.
    """
    kwargs = dict(kwargs or {})
    refs: list[RefProxy[Any]] = []
    _find_refs(args, refs)
    _find_refs(kwargs, refs)
    refs.extend(r for r in register_custom_refs if issubclass(type(r), RefProxy))
    try:
        future = submit_fn(*args, **kwargs)
    except BaseException:
        _release_all(refs)
        raise
    if refs:
        add = getattr(future, 'add_done_callback', None)
        if add is None:
            logger.warning(
                'the future %r has no add_done_callback; the %d borrows passed to the '
                'task end when the local borrow objects are garbage collected',
                future,
                len(refs),
            )
        else:
            add(lambda _: _release_all(refs))
    return future
