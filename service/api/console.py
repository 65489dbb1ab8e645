"""``/console``: the web console, static pages served from the package.

The pages hold no data and no secret: they are plain HTML, CSS and JavaScript modules
that call the public v1 API from the visitor's browser, with the visitor's key
(docs/console.md). So they are served to anyone, like ``/docs``, and every request they
make is checked as any other client's. Their URLs are relative, so the console works
behind a proxy or under ``--root-path`` as it does on the service's own port.
"""

from __future__ import annotations

import os
from importlib.resources import files

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

CONSOLE_URL = "/console"


def install_console(app: FastAPI) -> None:
    """Serve the console at ``/console/`` (``/console`` redirects there, so that the
    pages' relative URLs resolve under it)."""
    # Where the pages really are: under a strict editable install the package's folder
    # holds links to them, which StaticFiles refuses (they lead out of its directory).
    folder = os.path.dirname(os.path.realpath(files("wander.service") / "console" / "index.html"))

    @app.get(CONSOLE_URL, include_in_schema=False)
    async def console() -> RedirectResponse:
        return RedirectResponse("console/", status_code=308)

    app.mount(CONSOLE_URL + "/", StaticFiles(directory=folder, html=True), name="console")
