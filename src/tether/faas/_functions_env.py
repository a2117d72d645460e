"""What a registered function says about where it was made and where it must run.

``Client.register_function(f, environment=...)`` wraps the serialized function in a small
envelope before it goes to the service::

    MAGIC | 4-byte big-endian length | JSON header | serialized function

The header holds the Python environment the function asks for (``environment``: ``None``
for the endpoint's default, a name the endpoint's ``[environments]`` table declares, or
an absolute interpreter or virtual-environment path on the endpoint), and the Python and
tether versions of the process that serialized it. The service stores the envelope as
the function's body (so the same function asking for two environments has two ids); the
endpoint's agent opens it, runs the function in that environment and refuses, before
running it, a function that environment cannot read (:func:`check_readable`). A body
without the envelope (an older client, a raw registration) asks for nothing and is not
checked.
"""

from __future__ import annotations

import json
import platform
import re
from typing import Any

from tether.exceptions import ConfigError
from tether.faas._version import VersionMismatch, compare_versions, release_of

__all__ = [
    'DEFAULT',
    'SubmissionChecks',
    'check_environment_name',
    'check_readable',
    'function_meta',
    'open_envelope',
    'wrap',
]

_MAGIC = b'\x00tether-function\x00'
_MAX_HEADER = 64 * 1024

DEFAULT = 'default'
"""The name of an endpoint's own environment (the interpreter its agent runs on)."""

_NAME = re.compile(r'^[A-Za-z0-9_.-]{1,64}$')


def check_environment_name(value: Any) -> str | None:
    """``value`` as an environment a function may ask for (``None``: the default).

    Raises:
        ConfigError: neither a plain name (letters, digits, ``_.-``) nor an absolute path.
    """
    if value is None or value == DEFAULT:
        return None
    if not isinstance(value, str):
        raise ConfigError(f'environment must be a string (a name or a path), not {value!r}')
    if value.startswith('/'):
        if '\x00' in value or len(value) > 4096:
            raise ConfigError(f'environment path {value[:80]!r}... is not a usable path')
        return value
    if not _NAME.match(value):
        raise ConfigError(
            f'environment {value!r} is neither a name (letters, digits, "_", ".", "-"; as '
            "declared under [environments.NAME] in the endpoint's config.toml) nor an "
            'absolute path of an interpreter or virtual environment on the endpoint'
        )
    return value


def function_meta(environment: str | None, serializer: str) -> dict[str, Any]:
    """The header of a function serialized here with ``serializer``."""
    import tether

    return {
        'environment': environment,
        'python': platform.python_version(),
        'serializer': serializer,
        'tether': tether.__version__,
    }


def wrap(body: bytes, meta: dict[str, Any]) -> bytes:
    """``body`` in the envelope with ``meta`` (see the module docstring)."""
    header = json.dumps(meta, sort_keys=True, separators=(',', ':')).encode()
    return _MAGIC + len(header).to_bytes(4, 'big') + header + body


def open_envelope(body: bytes) -> tuple[dict[str, Any] | None, bytes]:
    """``(meta, serialized function)``; ``meta`` is ``None`` for a body without envelope.

    Raises:
        ConfigError: the envelope is malformed.
    """
    if not body.startswith(_MAGIC):
        return None, body
    start = len(_MAGIC) + 4
    size = int.from_bytes(body[len(_MAGIC) : start], 'big')
    if size > _MAX_HEADER or start + size > len(body):
        raise ConfigError('malformed function envelope (its header is cut or too large)')
    try:
        meta = json.loads(body[start : start + size])
    except ValueError as e:
        raise ConfigError(f'malformed function envelope: {e}') from e
    if not isinstance(meta, dict):
        raise ConfigError('malformed function envelope (its header is not an object)')
    return meta, body[start + size :]


def _minor(version: str) -> tuple[int, ...]:
    return (*release_of(version), 0, 0)[:2]


def check_readable(meta: dict[str, Any], info: dict[str, Any], where: str) -> None:
    """Raise if the environment described by ``info`` (what it reported:
    ``python``, ``tether``, ``serializers``) cannot read a function with ``meta``.

    A function serialized by value (``pickle``: cloudpickle's bytecode) needs the same
    Python ``MAJOR.MINOR`` as the process that made it; the environment's tether must be
    at least the submitter's ``MAJOR.MINOR`` (its payloads may use what an older tether
    cannot read); the function's serializer must be one the environment has.

    Raises:
        VersionMismatch: a Python or tether version the environment cannot read.
        ConfigError: the environment could not be started or lacks the serializer.
    """
    if info.get('error'):
        raise ConfigError(f'{where} cannot run functions: {info["error"]}')
    serializer = str(meta.get('serializer') or 'pickle')
    made = str(meta.get('python') or '')
    there = str(info.get('python') or '')
    if serializer == 'pickle' and made and there and _minor(made) != _minor(there):
        raise VersionMismatch(
            f'the function was serialized by Python {made} and {where} runs Python '
            f'{there}: a pickled function is read only by the same Python MAJOR.MINOR '
            f'({".".join(map(str, _minor(made)))}). Submit from Python '
            f'{".".join(map(str, _minor(there)))}, register the function with '
            "function_serializer='source', or choose an environment with that Python"
        )
    tether_made, tether_there = meta.get('tether'), info.get('tether')
    if tether_made and tether_there:
        wanted = '.'.join(map(str, _minor(str(tether_made))))
        try:
            compare_versions(str(tether_there), wanted)
        except VersionMismatch as e:
            raise VersionMismatch(
                f'{where} has tether {tether_there}, older than the {wanted} the function '
                f'was serialized with ({e}): upgrade tether there'
            ) from None
    serializers = info.get('serializers')
    if isinstance(serializers, list) and serializer not in serializers:
        raise ConfigError(
            f'{where} cannot load functions serialized with {serializer!r} (it has '
            f'{", ".join(map(str, serializers)) or "none"}): install cloudpickle there'
        )


class SubmissionChecks:
    """A client's checks at submission: a function this client registered, sent to an
    endpoint that reported its environments, is refused here (before it is sent) when the
    environment it asks for is unknown there or cannot read it.

    ``endpoint_info(endpoint_id)`` returns what the service knows of an endpoint (the
    answer of ``GET /v1/endpoints/{id}``); it is asked once per endpoint, again when a
    check fails on what it said more than ``stale_s`` seconds ago. When it cannot be
    asked, nothing is checked here (the endpoint checks).
    """

    def __init__(self, endpoint_info: Any, stale_s: float = 5.0) -> None:
        self._endpoint_info = endpoint_info
        self._stale_s = stale_s
        self.meta: dict[str, dict[str, Any]] = {}  # function id -> its envelope's header
        self._passed: set[tuple[str, str]] = set()
        self._endpoints: dict[str, tuple[float, dict[str, Any] | None]] = {}

    def check(self, function_id: str, endpoint_id: str) -> None:
        """Raise if ``endpoint_id`` is known to be unable to run ``function_id``.

        Raises:
            VersionMismatch: the environment's Python or tether cannot read the function.
            ConfigError: the endpoint has no such environment, or it cannot start.
        """
        if (function_id, endpoint_id) in self._passed:
            return
        meta = self.meta.get(function_id)
        if meta is None:
            return  # registered elsewhere: the endpoint checks it
        try:
            self._check(meta, endpoint_id, fresh=False)
        except (VersionMismatch, ConfigError):
            self._check(meta, endpoint_id, fresh=True)  # what the endpoint says now
        self._passed.add((function_id, endpoint_id))

    def _environments(self, endpoint_id: str, fresh: bool) -> dict[str, Any] | None:
        import time

        now = time.monotonic()
        found = self._endpoints.get(endpoint_id)
        if found is None or (fresh and now - found[0] > self._stale_s):
            try:
                info = (self._endpoint_info(endpoint_id).get('info') or {}).get('environments')
            except Exception:  # not found, unreachable: submission says so
                info = None
            found = self._endpoints[endpoint_id] = (now, info if isinstance(info, dict) else None)
        return found[1]

    def _check(self, meta: dict[str, Any], endpoint_id: str, *, fresh: bool) -> None:
        reported = self._environments(endpoint_id, fresh)
        if not reported:
            return  # never connected, or a remote engine: the endpoint checks
        name = str(meta.get('environment') or DEFAULT)
        info = reported.get(name)
        if info is None:
            if name.startswith('/'):
                return  # an interpreter the endpoint has not probed yet: it checks
            known = ', '.join(sorted(reported))
            raise ConfigError(
                f'endpoint {endpoint_id} has no environment {name!r} (it has {known}): '
                "declare it under [environments] in the endpoint's config.toml, or "
                'register the function with another environment='
            )
        check_readable(meta, info, f'environment {name!r} of endpoint {endpoint_id}')
