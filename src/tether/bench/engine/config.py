"""The engine's configuration (``[engine]`` of a run config): :class:`EngineConfig`."""

from __future__ import annotations

import os

import pydantic

from tether.bench.engine._engine import Engine
from tether.bench.executor import ExecutorConfig
from tether.bench.filter import FilterConfig
from tether.bench.record import JSONRecordLogger
from tether.bench.transformer import TransformerConfig
from tether.exceptions import ConfigError

__all__ = ['EngineConfig']


def _default_executor() -> ExecutorConfig:
    from tether.bench.executor.python import ProcessPoolConfig

    return ProcessPoolConfig()


class EngineConfig(pydantic.BaseModel):
    """``[engine]``: the executor, the optional transformer and filter, the record file."""

    model_config = pydantic.ConfigDict(extra='forbid')

    executor: pydantic.SerializeAsAny[ExecutorConfig] = pydantic.Field(
        default_factory=_default_executor,
        description='the executor (default: a process pool of one worker per CPU)',
    )
    transformer: pydantic.SerializeAsAny[TransformerConfig] | None = None
    filter: pydantic.SerializeAsAny[FilterConfig] | None = None
    task_record_file_name: str | None = pydantic.Field(
        default='tasks.jsonl',
        description='task records in the run directory (empty: none)',
    )

    def get_engine(self, run_dir: str | os.PathLike[str] | None = None) -> Engine:
        """Build the executor, transformer, filter and record logger, then the engine."""
        record_logger = None
        if self.task_record_file_name and run_dir is not None:
            record_logger = JSONRecordLogger(os.path.join(run_dir, self.task_record_file_name))
        transformer = None if self.transformer is None else self.transformer.get_transformer()
        filter_ = None if self.filter is None else self.filter.get_filter()
        if filter_ is not None and transformer is None:
            raise ConfigError('[engine.filter] needs an [engine.transformer] to filter for')
        executor = self.executor.get_executor()
        return Engine(
            executor,
            filter_=filter_,
            transformer=transformer,
            record_logger=record_logger,
        )
