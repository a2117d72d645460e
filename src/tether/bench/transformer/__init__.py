"""Data transformers: pass task data by identifier instead of by value.

A :class:`Transformer` turns an object into a small identifier
(:meth:`~tether.bench.transformer.Transformer.transform`) and an identifier back into the
object (:meth:`~tether.bench.transformer.Transformer.resolve`). :class:`TaskDataTransformer`
pairs one with a :mod:`filter <tether.bench.filter>`: the engine transforms the arguments a filter
selects before submitting a task, the task resolves them on the worker (timing it), and
the same happens to the task's result in reverse.

Built in: :class:`~tether.bench.transformer.file.PickleFileTransformer` (pickles to files
in a shared directory) and :class:`~tether.bench.transformer.store.StoreTransformer` (a
tether :class:`~tether.store.Store` over any connector; registered as ``store`` and, for
the seed's configuration files, ``proxystore``).
"""

from __future__ import annotations

from tether._lazy import lazy_attributes
from tether.bench.transformer._protocol import (
    TaskDataTransformer,
    Transformer,
    TransformerConfig,
)

__all__ = [
    'PickleFileTransformer',
    'PickleFileTransformerConfig',
    'ProxyTransformer',
    'ProxyTransformerConfig',
    'StoreTransformer',
    'StoreTransformerConfig',
    'TaskDataTransformer',
    'Transformer',
    'TransformerConfig',
]

# Importable from the package as in TaPS; imported on first use.
_LAZY = {
    'PickleFileTransformer': 'tether.bench.transformer.file',
    'PickleFileTransformerConfig': 'tether.bench.transformer.file',
    'ProxyTransformer': 'tether.bench.transformer.store',
    'ProxyTransformerConfig': 'tether.bench.transformer.store',
    'StoreTransformer': 'tether.bench.transformer.store',
    'StoreTransformerConfig': 'tether.bench.transformer.store',
}


__getattr__ = lazy_attributes(__name__, _LAZY)
