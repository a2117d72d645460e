"""Minimal FITS and IPAC-style table I/O for the montage app's NumPy toolkit.

Images are single-HDU FITS files (``BITPIX = -64``, two axes) with a linear sky
projection: the sky coordinate of pixel ``i`` (1-based) on axis ``k`` is
``CRVAL{k} + (i - CRPIX{k}) * CDELT{k}``. Header templates (``.hdr``) are the same
cards as text, one per line, as Montage writes them. Tables are whitespace-separated
rows under a ``| name | name |`` line, the shape of Montage's ASCII tables.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from tether.exceptions import InvalidArgumentError

__all__ = [
    'Header',
    'read_fits',
    'read_header',
    'read_table',
    'write_fits',
    'write_header',
    'write_table',
]

Header = dict[str, Any]
"""FITS header keywords and values (``int``, ``float``, ``str`` or ``bool``)."""

_BLOCK = 2880
_CARD = 80


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return f'{"T" if value else "F":>20}'
    if isinstance(value, int):
        return f'{value:>20d}'
    if isinstance(value, float):
        return f'{value!r:>20}'
    text = str(value).replace("'", "''")
    return f"'{text:<8}'"


def _cards(header: Header) -> list[str]:
    cards = []
    for key, value in header.items():
        if len(key) > 8:
            raise InvalidArgumentError(f'FITS keyword {key!r} is longer than 8 characters')
        cards.append(f'{key.upper():<8}= {_format_value(value)}'[:_CARD].ljust(_CARD))
    cards.append('END'.ljust(_CARD))
    return cards


def _parse_value(text: str) -> Any:
    text = text.strip()
    if text.startswith("'"):
        end = text.rfind("'")
        return text[1:end].replace("''", "'").rstrip()
    text = text.split('/', 1)[0].strip()
    if text in ('T', 'F'):
        return text == 'T'
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text.replace('D', 'E'))
    except ValueError:
        return text


def _parse_cards(lines: list[str]) -> Header:
    header: Header = {}
    for line in lines:
        key = line[:8].strip()
        if key == 'END':
            break
        if key and line[8:10] == '= ':
            header[key] = _parse_value(line[10:])
    return header


def write_fits(path: str | os.PathLike[str], data: np.ndarray, header: Header) -> None:
    """Write a 2-D float image (rows are ``NAXIS2``) with ``header``'s keywords."""
    if data.ndim != 2:
        raise InvalidArgumentError(f'a FITS image here has two axes, not {data.ndim}')
    base: Header = {
        'SIMPLE': True,
        'BITPIX': -64,
        'NAXIS': 2,
        'NAXIS1': int(data.shape[1]),
        'NAXIS2': int(data.shape[0]),
    }
    extra = {k: v for k, v in header.items() if k not in base}
    text = ''.join(_cards({**base, **extra})).encode('ascii')
    text += b' ' * (-len(text) % _BLOCK)
    payload = np.ascontiguousarray(data, dtype='>f8').tobytes()
    payload += b'\0' * (-len(payload) % _BLOCK)
    pathlib.Path(path).write_bytes(text + payload)


def read_fits(path: str | os.PathLike[str]) -> tuple[np.ndarray, Header]:
    """Read an image written by ``write_fits`` (or any 2-D primary HDU)."""
    raw = pathlib.Path(path).read_bytes()
    lines: list[str] = []
    offset = 0
    while True:
        if offset + _BLOCK > len(raw):
            raise InvalidArgumentError(f'{path}: not a FITS file (no END card)')
        block = raw[offset : offset + _BLOCK].decode('ascii', errors='replace')
        offset += _BLOCK
        lines.extend(block[i : i + _CARD] for i in range(0, _BLOCK, _CARD))
        if any(line[:8].strip() == 'END' for line in lines[-36:]):
            break
    header = _parse_cards(lines)
    if header.get('NAXIS') != 2:
        raise InvalidArgumentError(f'{path}: expected a 2-D image, NAXIS={header.get("NAXIS")}')
    types = {-64: '>f8', -32: '>f4', 8: 'u1', 16: '>i2', 32: '>i4', 64: '>i8'}
    dtype = np.dtype(types[int(header['BITPIX'])])
    shape = (int(header['NAXIS2']), int(header['NAXIS1']))
    count = shape[0] * shape[1]
    data = np.frombuffer(raw, dtype=dtype, count=count, offset=offset).reshape(shape)
    return data.astype(np.float64), header


def write_header(path: str | os.PathLike[str], header: Header) -> None:
    """Write a header template: one card a line."""
    lines = [card.rstrip() for card in _cards(header)]
    pathlib.Path(path).write_text('\n'.join(lines) + '\n', encoding='ascii')


def read_header(path: str | os.PathLike[str]) -> Header:
    """Read a header template (or the header of a FITS image)."""
    p = pathlib.Path(path)
    if p.suffix.lower() == '.fits':
        return read_fits(p)[1]
    return _parse_cards([line.ljust(_CARD) for line in p.read_text(encoding='ascii').splitlines()])


def write_table(
    path: str | os.PathLike[str],
    columns: list[str],
    rows: list[list[Any]],
) -> None:
    """Write a table: a ``| name |`` line, then one whitespace-separated line a row."""
    lines = ['| ' + ' | '.join(columns) + ' |']
    lines.extend(' ' + ' '.join(str(value) for value in row) for row in rows)
    pathlib.Path(path).write_text('\n'.join(lines) + '\n', encoding='utf-8')


def read_table(path: str | os.PathLike[str]) -> list[dict[str, str]]:
    """Read a table: the first ``|`` line names the columns; other ``|`` and ``\\`` lines skip."""
    columns: list[str] | None = None
    rows = []
    for line in pathlib.Path(path).read_text(encoding='utf-8').splitlines():
        if not line.strip() or line.startswith('\\'):
            continue
        if line.startswith('|'):
            if columns is None:
                columns = [c.strip() for c in line.strip().strip('|').split('|')]
            continue
        if columns is None:
            raise InvalidArgumentError(f'{path}: a row comes before the column names')
        values = line.split()
        if len(values) != len(columns):
            raise InvalidArgumentError(f'{path}: row {line!r} does not match {columns}')
        rows.append(dict(zip(columns, values, strict=True)))
    return rows
