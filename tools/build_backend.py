"""The build backend: setuptools, with every wheel built from an empty ``build/lib``.

setuptools copies the whole of ``build/lib`` into a wheel, so whatever an earlier
build left there (a module since deleted, an older layout's ``build/lib/service/``)
would ship as part of the package, even outside ``wander/``. This backend empties
``build/lib`` (and the ``bdist`` staging folders) first, and leaves the rest of
``build/``: the developer's editable install lives there (``build/__editable__.*``,
the tree of links that ``make`` installs in strict mode). Every other hook is
setuptools' own.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (the rest of the PEP 517 interface)


def build_wheel(
    wheel_directory: str,
    config_settings: dict[str, Any] | None = None,
    metadata_directory: str | None = None,
) -> str:
    for stale in ("build/lib", *(str(path) for path in Path("build").glob("bdist.*"))):
        shutil.rmtree(stale, ignore_errors=True)
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
