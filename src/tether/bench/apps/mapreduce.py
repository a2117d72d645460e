"""MapReduce word count over a generated corpus or the user's text files.

Map tasks count the words of their share of the corpus (a string, or a list of files the
task reads); one reduce task sums the counts; the ``most_common`` words and their counts
are written to ``output_file`` in the run directory.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import logging
import os
import pathlib
import random
import re
import string
from typing import TYPE_CHECKING, Literal

import pydantic

from tether.bench.apps import AppConfig
from tether.bench.apps._common import HoldsNothing
from tether.bench.registry import register
from tether.exceptions import InvalidArgumentError

if TYPE_CHECKING:
    from tether.bench.engine import Engine

__all__ = [
    'MapReduceApp',
    'MapReduceAppConfig',
    'MapreduceApp',
    'generate_files',
    'generate_text',
    'generate_word',
    'map_task',
    'reduce_task',
]

logger = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z0-9']+")


def generate_text(words: int, vocabulary: int, seed: int) -> str:
    """Return ``words`` random words drawn (Zipf-like) from a vocabulary of that size."""
    rng = random.Random(seed)
    vocab = [
        ''.join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 10)))
        for _ in range(vocabulary)
    ]
    weights = [1.0 / (rank + 1) for rank in range(vocabulary)]
    return ' '.join(rng.choices(vocab, weights=weights, k=words))


def generate_word(min_length: int, max_length: int) -> str:
    """One random lower-case word of ``min_length`` to ``max_length`` letters."""
    return ''.join(
        random.choices(string.ascii_lowercase, k=random.randint(min_length, max_length))
    )


def generate_files(
    data_dir: pathlib.Path | str,
    file_count: int,
    words_per_file: int,
    *,
    vocabulary: int = 1000,
    seed: int = 0,
) -> list[pathlib.Path]:
    """Write ``file_count`` text files of ``words_per_file`` words into an empty ``data_dir``.

    Raises:
        InvalidArgumentError: ``data_dir`` exists and is not empty (a ``ValueError``).
    """
    directory = pathlib.Path(data_dir)
    if directory.is_dir() and any(directory.iterdir()):
        raise InvalidArgumentError(
            f'Directory {directory} is not empty: generate_files writes only into an empty '
            'or new directory'
        )
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(file_count):
        path = directory / f'text-{i}.txt'
        path.write_text(generate_text(words_per_file, vocabulary, seed + i) + '\n')
        files.append(path)
    return files


def map_task(
    *sources: str | os.PathLike[str],
    text: str | None = None,
    paths: list[str] | None = None,
) -> collections.Counter[str]:
    """Count the words of ``text`` and of the files ``paths``.

    A positional ``str`` is text to count; a positional path object (``pathlib.Path``) is a
    file to read (TaPS's ``map_task(*paths)``).
    """
    counts: collections.Counter[str] = collections.Counter()
    files = list(paths or [])
    for source in sources:
        if isinstance(source, str):
            counts.update(_WORD.findall(source.lower()))
        else:
            files.append(os.fspath(source))
    if text:
        counts.update(_WORD.findall(text.lower()))
    for path in files:
        with open(path, encoding='utf-8', errors='replace') as f:
            for line in f:
                counts.update(_WORD.findall(line.lower()))
    return counts


def reduce_task(*counts: collections.Counter[str]) -> collections.Counter[str]:
    """Sum word counts."""
    total: collections.Counter[str] = collections.Counter()
    for c in counts:
        total.update(c)
    return total


@dataclasses.dataclass(kw_only=True, eq=False)
class MapReduceApp(HoldsNothing):
    """Word count with ``map_tasks`` map tasks and one reduce task."""

    mode: Literal['random', 'files'] = 'random'
    map_tasks: int = 8
    words_per_task: int = 10_000
    vocabulary: int = 1000
    files: str | None = None
    most_common: int = 10
    output_file: str = 'mapreduce.txt'
    seed: int = 0
    data_dir: pathlib.Path | str | None = None
    generate: bool = False
    generated_files: int = 10
    generated_words: int = 10_000

    def __post_init__(self) -> None:
        if self.data_dir is not None:
            self.data_dir = pathlib.Path(self.data_dir).absolute()
            self.mode, self.files = 'files', str(self.data_dir / '*')
        if self.mode == 'files' and not self.files:
            raise InvalidArgumentError("mode 'files' needs a glob pattern in files (or data_dir)")

    def run(self, engine: Engine, run_dir: pathlib.Path) -> None:
        """Count, then write the most common words."""
        if self.generate and self.data_dir is not None:
            generate_files(
                self.data_dir,
                self.generated_files,
                self.generated_words,
                vocabulary=self.vocabulary,
                seed=self.seed,
            )
        if self.mode == 'random':
            futures = [
                engine.submit(
                    map_task,
                    generate_text(self.words_per_task, self.vocabulary, self.seed + i),
                )
                for i in range(self.map_tasks)
            ]
        else:
            assert self.files is not None
            paths = sorted(glob.glob(self.files, recursive=True))
            if not paths:
                raise FileNotFoundError(f'no file matches {self.files!r}')
            shares = [paths[i :: self.map_tasks] for i in range(self.map_tasks)]
            futures = [engine.submit(map_task, paths=share) for share in shares if share]
        total = engine.submit(reduce_task, *futures).result()
        top = total.most_common(self.most_common)
        run_dir.mkdir(parents=True, exist_ok=True)
        with open(run_dir / self.output_file, 'w', encoding='utf-8') as f:
            for word, count in top:
                f.write(f'{word} {count}\n')
        logger.info('mapreduce: %d words, %d distinct', sum(total.values()), len(total))


@register('app')
class MapReduceAppConfig(AppConfig):
    """Word count (text analysis) over a generated corpus or text files."""

    name: str = 'mapreduce'
    mode: Literal['random', 'files'] = pydantic.Field(
        default='random',
        description="'random' (generated corpus) or 'files' (the files glob)",
    )
    map_tasks: int = pydantic.Field(default=8, ge=1, description='number of map tasks')
    words_per_task: int = pydantic.Field(
        default=10_000, ge=1, description='random: words per task'
    )
    vocabulary: int = pydantic.Field(default=1000, ge=1, description='random: distinct words')
    files: str | None = pydantic.Field(
        default=None, description="files: glob of text files ('**')"
    )
    most_common: int = pydantic.Field(default=10, ge=1, description='words written to the output')
    output_file: str = pydantic.Field(default='mapreduce.txt', description='output in the run dir')
    seed: int = pydantic.Field(default=0, description='random seed')
    data_dir: pathlib.Path | None = pydantic.Field(
        default=None,
        description='directory of text files to count (sets mode files; TaPS option)',
    )
    generate: bool = pydantic.Field(
        default=False, description='data_dir: first write generated files into it'
    )
    generated_files: int = pydantic.Field(default=10, ge=0, description='generate: files')
    generated_words: int = pydantic.Field(default=10_000, ge=0, description='generate: words each')

    def get_app(self) -> MapReduceApp:
        """Build the app."""
        return MapReduceApp(**self._app_arguments())


MapreduceApp = MapReduceApp
"""TaPS's name for :class:`MapReduceApp`."""
