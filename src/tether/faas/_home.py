"""The Globus Compute SDK's home-folder helper, on tether's faas home folder."""

from __future__ import annotations

import pathlib

from tether.faas._config import faas_home

__all__ = ['ensure_compute_dir', 'get_compute_dir']


def get_compute_dir() -> pathlib.Path:
    """This user's faas home folder, without creating it (see :func:`ensure_compute_dir`).

    ``$TETHER_FAAS_HOME`` when set and not empty (the SDK's ``$GLOBUS_COMPUTE_USER_DIR``),
    else ``$XDG_RUNTIME_DIR/tether-faas`` when that runtime folder exists, else
    ``~/.tether/faas`` (the SDK's ``~/.globus_compute``).
    """
    return faas_home()


def ensure_compute_dir() -> pathlib.Path:
    """This user's faas home folder (:func:`get_compute_dir`), created if it is missing.

    A folder created here (and any missing parent) is readable by its owner only.

    Raises:
        FileExistsError: something other than a folder has the home folder's name.
        PermissionError: a parent folder refuses the creation.
    """
    home = get_compute_dir()
    if home.exists() and not home.is_dir():
        raise FileExistsError(
            f'Error creating directory {home}: a file of that name is in the way '
            '(remove or rename it, or set TETHER_FAAS_HOME to another folder)'
        )
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    return home
