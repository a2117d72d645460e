"""TaPS's ``run.utils`` and ``run.env`` modules on tether.bench.run (docs/porting.md, TaPS)."""

from __future__ import annotations

import json
import os
import pathlib
import uuid

import pydantic
import pytest

from tether.bench.run.env import Environment
from tether.bench.run.utils import (
    change_cwd,
    flatten_mapping,
    prettify_mapping,
    prettify_validation_error,
    update_environment,
)
from tether.exceptions import InvalidArgumentError


def test_change_cwd_restores(tmp_path: pathlib.Path) -> None:
    before = pathlib.Path.cwd()
    with change_cwd(tmp_path) as now:
        assert now == tmp_path.absolute() == pathlib.Path.cwd()
    assert pathlib.Path.cwd() == before


def test_flatten_and_prettify() -> None:
    assert flatten_mapping({'a': {'b': {'c': 1}}, 'd': 2, 'e': {}}) == {
        'a.b.c': 1,
        'd': 2,
        'e': {},
    }
    text = prettify_mapping({'z': {'y': [1], 'name': 'n'}, 'a': 'x', 'e': {}})
    assert text == "a: 'x'\ne:\nz:\n  name: 'n'\n  y: [1]"
    assert prettify_mapping({}) == ''


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra='forbid')
    count: int


def test_prettify_validation_error_is_a_value_error() -> None:
    with pytest.raises(pydantic.ValidationError) as info:
        _Model(count='x', other=1)  # type: ignore[call-arg,arg-type]
    error = prettify_validation_error(info.value, _Model)
    assert isinstance(error, InvalidArgumentError)
    assert isinstance(error, ValueError)
    text = str(error)
    assert '_Model' in text
    assert 'count: ' in text
    assert 'int_parsing' in text
    assert 'extra_forbidden' in text


def test_update_environment_sets_and_restores() -> None:
    kept, added = str(uuid.uuid4()), str(uuid.uuid4())
    os.environ[kept] = 'before'
    try:
        with update_environment({kept: 'during', added: 'new'}):
            assert os.environ[kept] == 'during'
            assert os.environ[added] == 'new'
        assert os.environ[kept] == 'before'
        assert added not in os.environ
    finally:
        os.environ.pop(kept, None)


def test_environment_collect_format_write(tmp_path: pathlib.Path) -> None:
    env = Environment.collect()
    assert 'python:' in env.format()
    path = tmp_path / 'env.json'
    env.write_json(path)
    assert json.loads(path.read_text())['python'] == env.data['python']
    assert env == Environment(dict(env.data))


def test_config_defaults_the_engine_and_reads_toml(tmp_path: pathlib.Path) -> None:
    from tether.bench.apps.synthetic import SyntheticAppConfig
    from tether.bench.executor.python import ProcessPoolConfig
    from tether.bench.run.config import Config

    config = Config(app=SyntheticAppConfig(task_count=2))
    assert isinstance(config.engine.executor, ProcessPoolConfig)
    path = tmp_path / 'config.toml'
    config.write_toml(path)
    assert Config.from_toml(path) == config
    assert "[engine.executor]\nname = 'process-pool'" in path.read_text().replace('"', "'")


def test_parse_args_to_config_takes_taps_spellings(tmp_path: pathlib.Path) -> None:
    from tether.bench.executor.python import ThreadPoolConfig
    from tether.bench.run.parse import normalize_args, parse_args_to_config
    from tether.bench.transformer import PickleFileTransformerConfig

    assert normalize_args(['--engine.executor=thread-pool', '--app.task-count', 'a-b']) == [
        '--executor=thread-pool',
        '--app.task_count',
        'a-b',
    ]
    config = parse_args_to_config(
        [
            '--app',
            'synthetic',
            '--app.task-count',
            '3',
            '--engine.executor',
            'thread-pool',
            '--engine.transformer',
            'file',
            '--engine.transformer.file-dir',
            str(tmp_path),
        ]
    )
    assert isinstance(config.engine.executor, ThreadPoolConfig)
    assert isinstance(config.engine.transformer, PickleFileTransformerConfig)
    assert config.engine.transformer.file_dir == str(tmp_path)
    assert config.app.task_count == 3  # type: ignore[attr-defined]


def test_parse_args_to_config_help_and_missing_app(capsys: pytest.CaptureFixture[str]) -> None:
    from tether.bench.run.parse import parse_args_to_config

    with pytest.raises(SystemExit):
        parse_args_to_config([])
    assert '--help' in capsys.readouterr().out
    with pytest.raises(ValueError, match='App name option is required'):
        parse_args_to_config(['--engine.executor', 'thread-pool'])
