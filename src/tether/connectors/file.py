"""Connector for a (shared) file system directory.

Each object is one file named by its key. Writes go to a temporary file in the same
directory that is then atomically renamed into place, so a reader sees either the whole
object or none of it, even when the writer crashes mid-write (leftover temporaries are
named ``.tmp-*`` and removed by :meth:`FileConnector.close` with ``clear=True`` or by
:func:`remove_temporaries`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import NamedTuple

from tether._atomic import write_and_replace
from tether.connectors._keyed import KeyedWrites
from tether.connectors._util import new_id
from tether.connectors.config import ConnectorConfigModel
from tether.exceptions import ConnectorError
from tether.serialize import BytesLike

__all__ = ['FileConnector', 'FileConnectorConfig', 'FileKey', 'remove_temporaries']

_TMP_PREFIX = '.tmp-'


class FileKey(NamedTuple):
    """Key of an object in a :class:`FileConnector`: the file's name."""

    filename: str


class FileConnectorConfig(ConnectorConfigModel):
    """Configuration of a :class:`FileConnector` (see its arguments)."""

    store_dir: str
    clear: bool = False
    buffering: int = -1


class FileConnector(KeyedWrites[FileKey]):
    """A connector that stores each object as a file in ``store_dir``.

    Args:
        store_dir: Directory for the objects; created if missing. On a shared file
            system, every process that mounts it can resolve the proxies.
        clear: Remove the whole directory when :meth:`close` is called.
        buffering: ProxyStore's ``open()`` buffering policy, accepted and kept in the
            config for programs that pass it; it changes nothing here, where each object
            is written and read whole with raw system calls (no buffered file object).
    """

    config_model = FileConnectorConfig

    def __init__(
        self,
        store_dir: str | os.PathLike[str],
        clear: bool = False,
        buffering: int = -1,
    ) -> None:
        self.store_dir = os.path.abspath(os.fspath(store_dir))
        self.clear = clear
        self.buffering = buffering
        self._settle()
        try:
            os.makedirs(self.store_dir, exist_ok=True)
        except OSError as e:
            raise ConnectorError(f'cannot create store directory {self.store_dir!r}: {e}') from e

    def __repr__(self) -> str:
        return f'FileConnector(store_dir={self.store_dir!r})'

    def _path(self, key: FileKey) -> str:
        name = key.filename
        if '/' in name or name.startswith('.'):
            raise ConnectorError(f'invalid file key {key!r} for {self!r}')
        return os.path.join(self.store_dir, name)

    def _missing_dir(self, e: OSError) -> ConnectorError:
        if not os.path.isdir(self.store_dir):
            return ConnectorError(
                f'store directory {self.store_dir!r} of {self!r} no longer exists; '
                'was it removed while the store was in use?',
            )
        return ConnectorError(f'I/O error in {self!r}: {e}')

    def close(self, clear: bool | None = None) -> None:
        """Close the connector, removing the directory if ``clear`` (default: the init flag)."""
        if self.clear if clear is None else clear:
            shutil.rmtree(self.store_dir, ignore_errors=True)

    def evict(self, key: FileKey) -> None:
        """Remove the object under ``key``."""
        try:
            os.remove(self._path(key))
        except FileNotFoundError:
            if not os.path.isdir(self.store_dir):
                raise self._missing_dir(FileNotFoundError(self.store_dir)) from None
        except OSError as e:
            raise self._missing_dir(e) from e

    def exists(self, key: FileKey) -> bool:
        """Return whether ``key`` is stored."""
        return os.path.exists(self._path(key))

    def _new_key(self) -> FileKey:
        return FileKey(new_id())

    def get(self, key: FileKey) -> BytesLike | None:
        """Return the bytes under ``key`` (a writable ``bytearray``) or ``None``."""
        path = self._path(key)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            if not os.path.isdir(self.store_dir):
                raise self._missing_dir(FileNotFoundError(path)) from None
            return None
        except OSError as e:
            raise self._missing_dir(e) from e
        try:
            size = os.fstat(fd).st_size
            buf = bytearray(size)
            view = memoryview(buf)
            got = 0
            while got < size:
                n = os.readv(fd, [view[got:]])
                if n == 0:
                    raise ConnectorError(f'{path!r} was truncated while reading')
                got += n
            return buf
        except OSError as e:
            raise ConnectorError(f'cannot read {path!r}: {e}') from e
        finally:
            os.close(fd)

    def _write(self, key: FileKey, parts: Sequence[BytesLike]) -> None:
        final = self._path(key)
        tmp = os.path.join(self.store_dir, f'{_TMP_PREFIX}{key.filename}.{new_id()[:12]}')
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            write_and_replace(fd, tmp, final, parts)
        except OSError as e:
            raise self._missing_dir(e) from e


def remove_temporaries(store_dir: str | os.PathLike[str]) -> int:
    """Remove temporaries left in ``store_dir`` by writers that crashed; return how many."""
    n = 0
    for entry in os.scandir(store_dir):
        if entry.name.startswith(_TMP_PREFIX):
            try:
                os.remove(entry.path)
                n += 1
            except FileNotFoundError:
                pass
    return n
