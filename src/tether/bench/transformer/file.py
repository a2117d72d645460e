"""PickleFileTransformer: objects pickled to files in a directory all workers share.

Trust: resolving unpickles the file an identifier names. Anyone who can write in the
directory can run code in the client and every worker; use a directory only you can
write (the default is a new private temporary directory). See ``docs/security.md``.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import shutil
import tempfile
import uuid
from typing import Any

import pydantic

from tether.bench.registry import register
from tether.bench.transformer._protocol import TransformerConfig
from tether.exceptions import BenchError

__all__ = ['PickleFileIdentifier', 'PickleFileTransformer', 'PickleFileTransformerConfig']


@dataclasses.dataclass(frozen=True, slots=True)
class PickleFileIdentifier:
    """Names the file holding one pickled object."""

    path: str

    def __reduce__(self) -> tuple[Any, ...]:
        return (PickleFileIdentifier, (self.path,))


class PickleFileTransformer:
    """Pickles objects to files under ``file_dir``; resolving reads them back.

    Files stay until :meth:`close` (a result may be read by several tasks), which removes
    the directory if this transformer created it.

    Args:
        file_dir: Directory shared by the client and all workers (default: a new
            private temporary directory, which only works on one host).
    """

    def __init__(self, file_dir: str | os.PathLike[str] | None = None) -> None:
        self._created = file_dir is None or not os.path.exists(file_dir)
        if file_dir is None:
            file_dir = tempfile.mkdtemp(prefix='tether-bench-pickle-')
        self.file_dir = os.path.abspath(os.fspath(file_dir))
        os.makedirs(self.file_dir, mode=0o700, exist_ok=True)

    def __getstate__(self) -> dict[str, Any]:
        return {'file_dir': self.file_dir, '_created': False}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def is_identifier(self, obj: Any) -> bool:
        """Return whether ``obj`` is a :class:`PickleFileIdentifier`."""
        return type(obj) is PickleFileIdentifier

    def transform(self, obj: Any) -> PickleFileIdentifier:
        """Pickle ``obj`` to a new file and return its identifier."""
        path = os.path.join(self.file_dir, f'{uuid.uuid4().hex}.pkl')
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        tmp = path + '.tmp'
        with open(tmp, 'wb') as f:
            f.write(data)
        os.replace(tmp, path)
        return PickleFileIdentifier(path)

    def resolve(self, identifier: PickleFileIdentifier) -> Any:
        """Unpickle the file ``identifier`` names.

        Raises:
            BenchError: if the file is missing (the transformer was closed, or the
                directory is not shared with this worker).
        """
        try:
            with open(identifier.path, 'rb') as f:
                data = f.read()
        except FileNotFoundError as e:
            raise BenchError(
                f'pickled task data {identifier.path!r} is missing: is {self.file_dir!r} '
                'shared with every worker, and was the transformer closed too early?',
            ) from e
        return pickle.loads(data)

    def close(self) -> None:
        """Remove the directory if this transformer created it."""
        if self._created:
            shutil.rmtree(self.file_dir, ignore_errors=True)


@register('transformer')
class PickleFileTransformerConfig(TransformerConfig):
    """Pickle task data to files in a directory every worker can read."""

    name: str = 'file'
    file_dir: str | None = pydantic.Field(
        default=None,
        description='shared directory for the pickle files (default: a temporary one)',
    )

    def get_transformer(self) -> PickleFileTransformer:
        """Build the transformer."""
        return PickleFileTransformer(self.file_dir)
