"""tether._cli_options.config_option: the one ``--config FILE`` of the tether commands."""

from __future__ import annotations

import pathlib

import click
from click.testing import CliRunner

from tether._cli_options import config_option


def _command(*, required: bool) -> click.Command:
    @click.command()
    @config_option('config_path', 'The file.', required=required)
    def command(config_path: str | None) -> None:
        click.echo(repr(config_path))

    return command


def test_optional_config_defaults_to_none(tmp_path: pathlib.Path) -> None:
    runner = CliRunner()
    assert runner.invoke(_command(required=False), []).output == 'None\n'
    path = tmp_path / 'c.toml'
    out = runner.invoke(_command(required=False), ['--config', str(path)]).output
    assert out == f'{str(path)!r}\n'
    assert '--config FILE  The file.' in runner.invoke(_command(required=False), ['--help']).output


def test_required_config_and_no_folder(tmp_path: pathlib.Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(_command(required=True), [])
    assert missing.exit_code == 2
    assert "Missing option '--config'" in missing.output
    folder = runner.invoke(_command(required=True), ['--config', str(tmp_path)])
    assert folder.exit_code == 2
    assert 'is a directory' in folder.output
