"""A FaaS task's result-store config is data from the network: only allowlisted types.

The endpoint's worker rebuilds the task's result store from the config the submission
carried; naming a type outside :mod:`tether.store.allowlist` must fail the task (with
the refusal as its error), never import or call that type.
"""

from __future__ import annotations

import pathlib
from typing import Any

from tether.faas._payload import pack_args
from tether.faas.endpoint._worker import run_task


def _make_big(n: int) -> bytes:
    return b'x' * n


def _message(rstore: dict[str, Any]) -> Any:
    return ('task-1', 'fn-1', 'x', None, 'tether', pack_args((4096,), {}), rstore, 10)


def test_a_result_store_naming_a_foreign_type_fails_the_task(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / 'ran'
    rstore = {
        'name': 'results',
        'connector_type': 'os.system',  # would run a shell command if imported and called
        'connector_config': {'command': f'touch {marker}'},
    }
    task_id, status, _ser, _data, error, _start, _end, _output = run_task(
        _message(rstore), {'fn-1': _make_big}
    )
    assert (task_id, status) == ('task-1', 'failed')
    assert error is not None
    assert error['type'] == 'tether.exceptions.UntrustedTypeError'
    assert not marker.exists()


def test_an_allowlisted_result_store_is_used(tmp_path: pathlib.Path) -> None:
    rstore = {
        'name': f'results-{tmp_path.name}',
        'connector_type': 'tether.connectors.file.FileConnector',
        'connector_config': {'store_dir': str(tmp_path / 'objects')},
    }
    _task_id, status, _ser, _data, error, _start, _end, _output = run_task(
        _message(rstore), {'fn-1': _make_big}
    )
    assert status == 'success', error
    assert len(list((tmp_path / 'objects').iterdir())) == 1  # the result went by proxy
