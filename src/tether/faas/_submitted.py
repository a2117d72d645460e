"""What a submitted batch becomes before it is queued: the header each task is queued with
(its time limit checked), the tasks that are new, and the refusal of tasks whose function
was deleted meanwhile."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tether.exceptions import FaasBadRequestError, FaasNotFoundError
from tether.faas import _frames
from tether.faas._queues import MAX_TIMEOUT, Entry

__all__ = ['only_new', 'refuse_deleted', 'task_message']


def task_message(task: _frames.SubmittedTask, group: str, received: float) -> dict[str, Any]:
    """The header a task is queued with for its endpoint (its time limit checked): the
    JSON form of a :class:`~tether.faas._frames.TaskMessage`."""
    task_id, function_id, _, serializer, store, threshold, timeout, stamps = task
    header: dict[str, Any] = {
        'task_id': task_id,
        'function_id': function_id,
        'task_group_id': group,
        'data_serializer': serializer,
        'result_store': store,
        'result_threshold': threshold,
        't': {**stamps, 'service_received': received},
    }
    if timeout is not None:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_TIMEOUT
        ):
            raise FaasBadRequestError(
                f'a task\'s "timeout" must be a number of seconds in (0, {MAX_TIMEOUT}]'
            )
        header['timeout'] = float(timeout)
    return header


def refuse_deleted(
    tasks: Sequence[_frames.SubmittedTask], unrecorded: Sequence[str], queued: int
) -> None:
    """Tasks not recorded though new: their function was deleted between the check and
    the insert (through another replica). Said plainly; the rest of the batch is queued."""
    if not unrecorded:
        return
    gone = set(unrecorded)
    fids = sorted({t.function_id for t in tasks if t.task_id in gone})
    raise FaasNotFoundError(
        f'function {fids[0]} was deleted while this batch was being submitted: its '
        f'{len(gone)} task(s) were not queued (the {queued} new task(s) of other '
        'functions were)'
    )


def only_new(queued: dict[str, list[Entry]], new: set[str]) -> dict[str, list[Entry]]:
    """The entries of ``queued`` whose task ids are ``new``, each once (an id repeated
    within the batch is queued once)."""
    first = set(new)
    out: dict[str, list[Entry]] = {}
    for eid, entries in queued.items():
        kept = []
        for entry in entries:
            if entry[0]['task_id'] in first:
                first.discard(entry[0]['task_id'])
                kept.append(entry)
        if kept:
            out[eid] = kept
    return out
