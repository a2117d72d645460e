"""What a user sends when reporting a faas problem: ``tether faas diagnostic``.

The report gathers, in titled sections: this host (Python, platform, user environment),
memory, swap and disk, the faas home folder, the most recently active endpoints' configs
(secrets REDACTED) and the tails of their logs. Token files are never read.

The parts are public: the Globus Compute SDK's ``diagnostic`` and ``hardware_report``
helpers port by changing the import (``docs/porting.md``): :func:`cat`,
:func:`get_recent_endpoints`, :func:`mem_info`, :func:`swap_info`,
:func:`python_runtime_host_info`.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pathlib
import platform
import re
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from tether.faas._home import get_compute_dir

__all__ = [
    'REDACTED',
    'cat',
    'diagnostic_report',
    'disk_info',
    'get_recent_endpoints',
    'mem_info',
    'python_runtime_host_info',
    'redact',
    'swap_info',
    'write_report',
]

REDACTED = 'REDACTED'

# TOML/JSON keys whose values are secrets (matched anywhere in the key, any case).
_SECRET_KEY = re.compile(
    r'^(\s*"?[\w.-]*(token|secret|password|passwd|credential|api[_-]?key|private[_-]?key)'
    r'[\w.-]*"?\s*[=:]\s*)(.+?)(,?\s*)$',
    re.IGNORECASE,
)
_SECRET_WORD = re.compile(
    r'token|secret|password|passwd|credential|api[_-]?key|private[_-]?key', re.IGNORECASE
)
# user:password@ in a URL
_URL_PASSWORD = re.compile(r'(\w+://[^:/@\s]+:)[^@\s]+@')
# files of an endpoint folder that are never shown (they hold its credential)
_NEVER_READ = frozenset({'token'})
_ENV_NAMES = ('HOME', 'USER', 'USERNAME', 'LANG', 'XDG_RUNTIME_DIR', 'PATH', 'VIRTUAL_ENV')


def _human(n_bytes: float) -> str:
    """``n_bytes`` in binary units from KiB up (the kernel counts memory in KiB)."""
    value = n_bytes / 1024
    for unit in ('KiB', 'MiB', 'GiB'):
        if value < 1024:
            return f'{value:.1f} {unit}'
        value /= 1024
    return f'{value:.1f} TiB'


def _rule(title: str, char: str) -> str:
    return char * len(title)


def cat(
    paths: Sequence[str | os.PathLike[str]],
    wildcard: bool = False,
    max_bytes: int | None = None,
) -> Callable[[], None]:
    """A step printing each file of ``paths``, framed by a header and a footer.

    Args:
        paths: Files to print (with ``wildcard``, glob patterns; ``**`` is recursive).
        wildcard: Expand ``paths`` as glob patterns.
        max_bytes: Print only the last ``max_bytes`` bytes of each file (a log's tail);
            ``None`` or a number below 1 prints whole files.

    Returns:
        A function of no argument that prints (the report runs it when its turn comes).
        Binary bytes are shown as replacement characters; a missing file is reported, not
        raised.
    """
    return _cat(paths, wildcard, max_bytes, lambda line: line)


def _cat(
    paths: Sequence[str | os.PathLike[str]],
    wildcard: bool,
    max_bytes: int | None,
    shown: Callable[[str], str],
) -> Callable[[], None]:
    """:func:`cat`, each line printed as ``shown`` makes it (the report's log tails:
    secrets redacted)."""

    def expand() -> list[str]:
        if not wildcard:
            return [os.fspath(p) for p in paths]
        found: list[str] = []
        for pattern in paths:
            found.extend(sorted(glob.glob(os.fspath(pattern), recursive=True)))
        return found

    def step() -> None:
        for name in expand():
            print(f'cat {name}')
            print(_rule(name, '='))
            try:
                with open(name, 'rb') as f:
                    if max_bytes is not None and max_bytes > 0:
                        f.seek(max(0, os.fstat(f.fileno()).st_size - max_bytes))
                    data = f.read()
            except FileNotFoundError:
                print(f'No file named {name}')
            except OSError as e:
                print(f'Cannot read {name}: {e}')
            else:
                text = data.decode('utf-8', errors='replace')
                # only newlines end lines (not the other separators str.splitlines knows)
                lines = text.split('\n')
                if text.endswith('\n'):
                    lines.pop()
                for line in lines:
                    print(f' | {shown(line)}')
            print(_rule(name, '-'))
            print()

    return step


def _newest_mtime(folder: pathlib.Path) -> float:
    newest = folder.stat().st_mtime
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                newest = max(newest, (pathlib.Path(root) / name).stat().st_mtime)
            except OSError:
                continue
    return newest


def get_recent_endpoints(
    base_dir: str | os.PathLike[str],
    ep_names: Iterable[str] = (),
    limit: int | None = None,
) -> list[pathlib.Path]:
    """The endpoint folders under ``base_dir``, the most recently active first.

    A folder's activity is the newest modification time of the folder or of any file in
    it (an empty folder counts by its own time).

    Args:
        base_dir: The folder holding one folder per endpoint.
        ep_names: Only these endpoints (empty: all).
        limit: At most this many (``None``: all).
    """
    base = pathlib.Path(base_dir)
    wanted = set(ep_names)
    if not base.is_dir():
        return []
    folders = [p for p in base.iterdir() if p.is_dir() and (not wanted or p.name in wanted)]
    folders.sort(key=_newest_mtime, reverse=True)
    return folders if limit is None else folders[: max(0, limit)]


def python_runtime_host_info() -> str:
    """The Python runtime, the host and the user environment, one ``Name: value`` a line."""
    lines = [
        f'Version: {sys.version}',
        f'Version info: {sys.version_info}',
        f'Interpreter path: {sys.executable}',
        f'CPU architecture: {platform.processor()}',
        f'CPU core count: {os.cpu_count()}',
        f'Node name: {platform.node()}',
        f'Platform: {platform.platform()}',
    ]
    lines += [f'{name}: {os.getenv(name)}' for name in _ENV_NAMES]
    if hasattr(os, 'getuid'):
        lines.append(f'uid: {os.getuid()}')
    return '\n'.join(lines)


def _meminfo() -> dict[str, int]:
    """``/proc/meminfo`` in bytes (empty where it does not exist)."""
    out: dict[str, int] = {}
    try:
        text = pathlib.Path('/proc/meminfo').read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(':')
        parts = rest.split()
        if parts and parts[0].isdigit():
            out[key] = int(parts[0]) * (1024 if parts[1:] == ['kB'] else 1)
    return out


def _usage(total: int, free: int) -> str:
    used = total - free
    percent = 100.0 * used / total if total else 0.0
    return (
        f'total: {_human(total)} used: {_human(used)} free: {_human(free)} ({percent:.1f}% used)'
    )


def mem_info() -> str:
    """This host's memory: total, used and available, in binary units (GiB ...)."""
    info = _meminfo()
    if 'MemTotal' in info:
        return _usage(info['MemTotal'], info.get('MemAvailable', info.get('MemFree', 0)))
    try:
        import psutil
    except ImportError:
        return 'memory: unknown on this system'
    vm = psutil.virtual_memory()
    return _usage(vm.total, vm.available)


def swap_info() -> str:
    """This host's swap: total, used and free, in binary units."""
    info = _meminfo()
    if 'SwapTotal' in info:
        return _usage(info['SwapTotal'], info.get('SwapFree', 0))
    try:
        import psutil
    except ImportError:
        return 'swap: unknown on this system'
    sw = psutil.swap_memory()
    return _usage(sw.total, sw.free)


def disk_info(path: str | os.PathLike[str] | None = None) -> str:
    """The disk holding ``path`` (default: the faas home folder, or its nearest parent)."""
    where = pathlib.Path(path) if path is not None else get_compute_dir()
    while not where.exists() and where != where.parent:
        where = where.parent
    usage = shutil.disk_usage(where)
    return f'{where}: ' + _usage(usage.total, usage.free)


def redact(text: str) -> str:
    """``text`` (a config file) with secret values and URL passwords replaced by REDACTED.

    A value is secret when its key names a token, secret, password, credential or key.
    A JSON object is redacted key by key and shown indented.
    """
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        return json.dumps(_redact_json(data), indent=2) + '\n'
    lines = [_redact_line(line) for line in text.splitlines()]
    return '\n'.join(lines) + ('\n' if text.endswith('\n') else '')


def _redact_line(line: str) -> str:
    """One line with a secret value (``key = value``) and URL passwords replaced."""
    m = _SECRET_KEY.match(line)
    shown = f'{m.group(1)}"{REDACTED}"{m.group(4)}' if m else line
    return _URL_PASSWORD.sub(rf'\g<1>{REDACTED}@', shown)


def _redact_json(value: Any, secret: bool = False) -> Any:
    if isinstance(value, dict):
        return {k: _redact_json(v, bool(_SECRET_WORD.search(str(k)))) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_json(v, secret) for v in value]
    if secret and value is not None:
        return REDACTED
    if isinstance(value, str):
        return _URL_PASSWORD.sub(rf'\g<1>{REDACTED}@', value)
    return value


def _print_redacted(path: pathlib.Path) -> Callable[[], None]:
    def step() -> None:
        name = str(path)
        print(f'cat {name} (secrets {REDACTED})')
        print(_rule(name, '='))
        try:
            print(redact(path.read_text(errors='replace')), end='')
        except OSError as e:
            print(f'Cannot read {name}: {e}')
        print(_rule(name, '-'))
        print()

    return step


def _endpoint_steps(folder: pathlib.Path, log_bytes: int) -> list[tuple[str, Callable[[], None]]]:
    steps: list[tuple[str, Callable[[], None]]] = []
    for path in sorted(folder.rglob('*')):
        if not path.is_file() or path.name in _NEVER_READ:
            continue
        if path.suffix in ('.toml', '.json', '.yaml', '.yml'):
            steps.append((f'config {path.name}', _print_redacted(path)))
        elif path.suffix == '.log' or '.log.' in path.name:
            # A log may hold a URL with its password: redacted like the configs.
            steps.append((f'log tail {path.name}', _cat([path], False, log_bytes, _redact_line)))
    return steps


def _text(fn: Callable[[], str]) -> Callable[[], None]:
    def step() -> None:
        try:
            print(fn())
        except Exception as e:  # a report reports its own failures and goes on
            print(f'failed: {type(e).__name__}: {e}')

    return step


def diagnostic_report(
    home: str | os.PathLike[str] | None = None,
    recent_endpoints: int | None = 5,
    endpoint_names: Iterable[str] = (),
    log_bytes: int = 64 * 1024,
) -> list[tuple[str, Callable[[], None]]]:
    """The report's sections, in order: ``(title, step)`` where ``step()`` prints.

    Args:
        home: The faas home folder (default: :func:`~tether.faas.get_compute_dir`).
        recent_endpoints: How many of the most recently active endpoints to include
            (``None``: all).
        endpoint_names: Only these endpoints (empty: any).
        log_bytes: The tail of each log to include, in bytes.
    """
    base = pathlib.Path(home) if home is not None else get_compute_dir()
    sections: list[tuple[str, Callable[[], None]]] = [
        ('Python and host', _text(python_runtime_host_info)),
        ('memory', _text(mem_info)),
        ('swap', _text(swap_info)),
        ('disk', _text(lambda: disk_info(base))),
        ('faas home folder', _text(lambda: _listing(base))),
    ]
    dev = base / 'dev.json'
    if dev.is_file():
        sections.append(('dev service', _print_redacted(dev)))
    folders = get_recent_endpoints(base / 'endpoints', endpoint_names, recent_endpoints)
    for folder in folders:
        for title, step in _endpoint_steps(folder, log_bytes):
            sections.append((f'endpoint {folder.name}: {title}', step))
    return sections


def _listing(base: pathlib.Path) -> str:
    if not base.exists():
        return f'{base} does not exist'
    lines = [str(base)]
    for path in sorted(base.rglob('*')):
        kind = '/' if path.is_dir() else f'  {path.stat().st_size} B'
        lines.append(f'  {path.relative_to(base)}{kind}')
    return '\n'.join(lines)


def write_report(sections: Iterable[tuple[str, Callable[[], None]]], stream: TextIO) -> None:
    """Run each section's step, writing ``== Diagnostic: <title> ==`` and its output."""
    for title, step in sections:
        stream.write(f'== Diagnostic: {title} ==\n')
        with contextlib.redirect_stdout(stream):
            try:
                step()
            except Exception as e:  # one failing section does not lose the others
                print(f'failed: {type(e).__name__}: {e}')
        stream.write('\n')
