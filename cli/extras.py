"""The command that installs one of Wander's extras, from where Wander was installed.

``pip install 'wander-rl[plot]'`` works only where wander-rl comes from an index; a user
of a checkout or a wheel got "No matching distribution". pip records where a package
came from (PEP 610's ``direct_url.json``): a hint names that same source.
"""

from __future__ import annotations

import json
from importlib import metadata
from typing import Any
from urllib.parse import unquote, urlsplit

DISTRIBUTION = "wander-rl"


def install_command(extra: str) -> str:
    """``pip install ...`` that adds ``extra`` to this install of Wander."""
    recorded = (
        found.read_text("direct_url.json") for found in metadata.distributions(name=DISTRIBUTION)
    )  # the install's record; a checkout's own wander_rl.egg-info, first on sys.path, has none
    direct_url = next((text for text in recorded if text), None)
    return command_for(json.loads(direct_url) if direct_url else None, extra)


def command_for(direct_url: dict[str, Any] | None, extra: str) -> str:
    """The command for an install that pip recorded as ``direct_url`` (None: from an
    index, or not recorded)."""
    url = (direct_url or {}).get("url", "")
    if direct_url is None or not url:
        return f"pip install '{DISTRIBUTION}[{extra}]'"
    if "vcs_info" in direct_url:
        return f"pip install '{DISTRIBUTION}[{extra}] @ {direct_url['vcs_info']['vcs']}+{url}'"
    if not url.startswith("file://"):
        return f"pip install '{DISTRIBUTION}[{extra}] @ {url}'"
    path = unquote(urlsplit(url).path)
    editable = direct_url.get("dir_info", {}).get("editable", False)
    return f"pip install {'-e ' if editable else ''}'{path}[{extra}]'"
