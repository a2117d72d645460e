"""TaPS's app helper functions and options on tether.bench's apps (docs/porting.md, TaPS)."""

from __future__ import annotations

import collections
import concurrent.futures
import pathlib
from collections.abc import Iterator

import pytest

from tether.bench.apps.configs.mapreduce import MapreduceConfig
from tether.bench.apps.mapreduce import (
    MapreduceApp,
    generate_files,
    generate_word,
    map_task,
)
from tether.bench.apps.synthetic import (
    Data,
    generate_data,
    noop_task,
    run_bag_of_tasks,
    run_diamond,
    run_reduce,
    run_sequential,
)
from tether.bench.engine import Engine
from tether.exceptions import InvalidArgumentError


@pytest.fixture
def engine() -> Iterator[Engine]:
    with Engine(concurrent.futures.ThreadPoolExecutor(2)) as engine:
        yield engine


def test_synthetic_data_helpers() -> None:
    data = generate_data(10)
    assert isinstance(data, Data)
    assert isinstance(data, bytes)
    assert len(data) == 10
    assert generate_data(0) == b''
    assert len(noop_task(data, output_size=5)) == 5


@pytest.mark.parametrize('run', [run_sequential, run_reduce, run_diamond])
def test_synthetic_shapes_as_functions(engine: Engine, run: object) -> None:
    run(engine, 3, 8, 0.0)  # type: ignore[operator]


def test_synthetic_bag_of_tasks(engine: Engine) -> None:
    run_bag_of_tasks(engine, 5, 8, 0.0, 2)


def test_generate_word_lengths() -> None:
    assert generate_word(0, 0) == ''
    assert 2 <= len(generate_word(2, 5)) <= 5


def test_generate_files_needs_an_empty_directory(tmp_path: pathlib.Path) -> None:
    files = generate_files(tmp_path / 'new', file_count=2, words_per_file=7)
    assert [len(f.read_text().split()) for f in files] == [7, 7]
    with pytest.raises(InvalidArgumentError, match='is not empty'):
        generate_files(tmp_path / 'new', 1, 1)
    with pytest.raises(ValueError, match='is not empty'):
        generate_files(tmp_path / 'new', 1, 1)


def test_map_task_reads_path_objects_and_counts_strings(tmp_path: pathlib.Path) -> None:
    path = tmp_path / 'a.txt'
    path.write_text('x y\nx')
    counts = map_task(path, 'y z')
    assert counts == collections.Counter({'x': 2, 'y': 2, 'z': 1})


def test_mapreduce_data_dir_generate(engine: Engine, tmp_path: pathlib.Path) -> None:
    data_dir = tmp_path / 'data'
    app = MapreduceApp(data_dir=data_dir, generate=True, generated_files=2, generated_words=5)
    app.run(engine, tmp_path / 'run')
    assert len(list(data_dir.iterdir())) == 2
    lines = (tmp_path / 'run' / 'mapreduce.txt').read_text().splitlines()
    assert sum(int(line.split()[1]) for line in lines) <= 10
    assert lines


def test_mapreduce_config_data_dir_is_absolute(tmp_path: pathlib.Path) -> None:
    config = MapreduceConfig(data_dir=pathlib.Path('relative'))
    assert config.data_dir is not None
    assert config.data_dir.is_absolute()
    app = config.get_app()
    assert app.mode == 'files'


def test_failure_types_enum_and_functions() -> None:
    from tether.bench.apps.failures import FAILURE_TYPES
    from tether.bench.apps.failures.app import FailureInjectionApp, FailuresApp
    from tether.bench.apps.failures.types import FAILURE_FUNCTIONS, FailureType

    assert FailureInjectionApp is FailuresApp
    for _ in range(20):
        assert FailureType.random() is not FailureType.RANDOM
    assert {kind.value for kind in FailureType} >= set(FAILURE_TYPES)
    expected = {
        FailureType.FAILURE: Exception,
        FailureType.IMPORT: ImportError,
        FailureType.MEMORY: MemoryError,
        FailureType.ULIMIT: OSError,
        FailureType.ZERO_DIVISION: ZeroDivisionError,
    }
    for kind, exc_type in expected.items():
        with pytest.raises(exc_type, match='Failure injection error'):
            FAILURE_FUNCTIONS[kind]()
    with pytest.raises(OSError, match='too many open files') as info:
        FAILURE_FUNCTIONS[FailureType.ULIMIT]()
    assert info.value.errno == 24


def test_failures_config_refuses_an_unknown_base_when_validated() -> None:
    import pydantic

    from tether.bench.apps.configs.failures import FailureInjectionConfig

    with pytest.raises(pydantic.ValidationError, match='Base app named "no-such-app" is unknown'):
        FailureInjectionConfig(base='no-such-app')
    assert FailureInjectionConfig(base='synthetic').base == 'synthetic'


def test_physics_total_time_sets_the_steps() -> None:
    from tether.bench.apps.configs.physics import PhysicsConfig

    assert PhysicsConfig(total_time=2).get_app().steps == 480
    assert PhysicsConfig(steps=7).get_app().steps == 7
    with pytest.raises(ValueError, match='total_time'):
        PhysicsConfig(total_time=0)


def test_moldesign_dataset_is_the_search_space(tmp_path: pathlib.Path) -> None:
    pytest.importorskip('rdkit')
    from tether.bench.apps.configs.moldesign import MoldesignConfig
    from tether.bench.apps.moldesign import _tasks

    smi = tmp_path / 'space.smi'
    smi.write_text('OCC name1\nCCN name2\n[Na+].[Cl-] salt\nC\nCCCCCCCCCCCC too-big\n')
    config = MoldesignConfig(dataset=smi)
    app = config.get_app()
    assert app.dataset == smi.absolute()
    assert _tasks.search_space(9, 10, 0, app.dataset) == ['CCN', 'CCO']
    assert MoldesignConfig().get_app().dataset is None
