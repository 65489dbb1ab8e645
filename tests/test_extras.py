"""Hints that install an extra name the source Wander was installed from (issue: a user of
a checkout or a wheel was told ``pip install 'wander-rl[plot]'``, which no index has)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wander.extras import command_for, install_command

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("direct_url", "command"),
    [
        (None, "pip install 'wander-rl[plot]'"),
        ({"url": "file:///src/wander", "dir_info": {"editable": True}},
         "pip install -e '/src/wander[plot]'"),
        ({"url": "file:///src/my%20wander", "dir_info": {}}, "pip install '/src/my wander[plot]'"),
        ({"url": "file:///tmp/dist/wander_rl-0.1.0-py3-none-any.whl", "archive_info": {}},
         "pip install '/tmp/dist/wander_rl-0.1.0-py3-none-any.whl[plot]'"),
        ({"url": "https://example.org/wander_rl-0.1.0.tar.gz", "archive_info": {}},
         "pip install 'wander-rl[plot] @ https://example.org/wander_rl-0.1.0.tar.gz'"),
        ({"url": "https://example.org/wander.git", "vcs_info": {"vcs": "git"}},
         "pip install 'wander-rl[plot] @ git+https://example.org/wander.git'"),
    ],
    ids=["index", "editable checkout", "checkout", "wheel", "archive", "git"],
)  # fmt: skip
def test_the_command_names_where_wander_came_from(
    direct_url: dict[str, object] | None, command: str
) -> None:
    assert command_for(direct_url, "plot") == command


def test_this_checkout_is_named() -> None:
    """The suite's venv installs this checkout in editable mode (``make test``)."""
    assert install_command("rg") == f"pip install -e '{ROOT}[rg]'"
