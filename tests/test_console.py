"""The web console (``/console``) in a real headless Chromium: a run created here, its
page, an episode replayed to its final position and checked against the archive, a game
played by clicking and its score checked against the API, the Live page, and a keyed
service behind the compose stack's nginx. No page may raise a JavaScript error or log
one to the console.

Chromium is Debian's (``apt-get install chromium``; ``.ci/run`` installs it), driven by
Playwright's Python package pointed at that executable: nothing is downloaded (never
``playwright install``). Without either, these tests skip and say which is missing.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from tests.helpers import archived
from tests.test_nginx import NGINX, nginx
from wander.client import WanderClient
from wander.client.models import AssistantMessage
from wander.client.policies.tictactoe import MinimaxPolicy
from wander.service.app import create_app
from wander.service.archive.migrations import upgrade
from wander.service.settings import Settings
from wander.testing import ServiceProcess, wait_until

RUN = "console/e2e"  # a slash, as labels such as org/model/1 have
PLAYED = "console-played"
CHROMIUM = os.environ.get("WANDER_TEST_CHROMIUM") or shutil.which("chromium")
TIMEOUT_MS = 10_000
DESKTOP, PHONE = (1280, 800), (390, 844)
THINK = re.compile(r"<think>(.*?)</think>")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("no playwright (pip install -e '.[dev]'): the browser tests are skipped")
    if CHROMIUM is None or not Path(CHROMIUM).exists():
        pytest.skip("no chromium (apt-get install chromium): the browser tests are skipped")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM)
        yield chromium
        chromium.close()


class Tab:
    """A page of its own, with every JavaScript error it raised or logged."""

    def __init__(self, browser: Any, width: int, height: int) -> None:
        self.context = browser.new_context(viewport={"width": width, "height": height})
        self.page = self.context.new_page()
        self.page.set_default_timeout(TIMEOUT_MS)
        self.errors: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        self.page.on("console", self._console)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"console.error: {message.text}")

    def close(self) -> None:
        self.context.close()


@contextmanager
def tab(
    browser: Any, allowed: Callable[[str], bool] = lambda _: False, size: tuple[int, int] = DESKTOP
) -> Iterator[Any]:
    """A page; when the block ends, no error may have happened on it but ``allowed`` ones."""
    opened = Tab(browser, *size)
    try:
        yield opened.page
        assert [e for e in opened.errors if not allowed(e)] == []
    finally:
        opened.close()


def invalid_game(client: WanderClient, run: str) -> str:
    """One game of first free cells whose second move repeats the first (invalid): the
    id of the episode."""
    [episode] = client.create("tictactoe", example=3, run=run)
    cells = []
    while not episode.done:
        cell = cells[0] if len(cells) == 1 else episode.info["board"].index(".")
        cells.append(cell)
        episode.step(f"<think>cell {cell} it is</think><move>{cell}</move>")
    return episode.id


@pytest.fixture(scope="module")
def demo(live: ServiceProcess) -> str:
    """The run: 8 games of a noisy minimax, and one with an invalid move; its id. (Played
    with the sync client: Playwright's sync API holds the thread's event loop.)"""
    policy = MinimaxPolicy(noise=0.5, seed=1)
    with WanderClient(live.url) as client:
        for example in range(8):
            [game] = client.create("tictactoe", example=example, run=RUN)
            while not game.done:
                game.step(policy.answer(game.info["board"]))
        episode = invalid_game(client, RUN)
        archived(client, RUN, 9)
    return episode


def board_of(page: Any) -> str:
    marks = page.locator("main .board [data-cell]").evaluate_all(
        "cells => cells.map(c => c.dataset.mark || '.').join('')"
    )
    return str(marks)


def test_the_run_page_shows_the_runs_summary_and_filters_its_episodes(
    browser: Any, live: ServiceProcess, demo: str
) -> None:
    with WanderClient(live.url) as client:
        summary = client.run(RUN)
        losses = client.episodes(RUN, outcome=["loss"], limit=1).total
    with tab(browser) as page:
        page.goto(f"{live.url}/console")
        page.wait_for_selector("table.runs")
        assert "null" not in page.locator("main").inner_text()  # nothing left unrendered
        page.locator("table.runs").get_by_role("link", name=RUN).click()
        page.wait_for_selector("table.episodes")
        assert page.locator("[data-field=episodes]").inner_text().startswith("9 (9 done)")
        mean, std = summary.reward.mean, summary.reward.std  # type: ignore[union-attr]
        shown = page.locator("[data-field=reward-mean]").inner_text()
        assert shown == f"{round(mean, 3):g} ± {round(std, 3):g}"
        rates = summary.metrics["outcome"].rates  # type: ignore[union-attr]
        for outcome, share in rates.items():
            legend = page.locator(f"[data-metric=outcome] [data-share='{outcome}']").inner_text()
            assert legend == f"{outcome} {round(share * 100, 1):g}%"
        invalid = summary.metrics["invalid_moves"].nonzero_rate  # type: ignore[union-attr]
        assert (
            page.locator("[data-field=invalid-rate]")
            .inner_text()
            .startswith(f"{round(invalid * 100, 1):g}%")
        )
        page.wait_for_selector("svg.chart")
        assert page.locator("svg.chart circle").count() == 9  # the reward of every episode
        assert page.locator("table.episodes tbody tr").count() == 9
        page.select_option("select[name=outcome]", "loss")
        page.get_by_role("button", name="Filter").click()
        shown = "[data-field=episodes-range]"
        page.wait_for_function(
            f"document.querySelector('{shown}')?.textContent.endsWith('of {losses}')"
        )
        assert page.locator("table.episodes tbody tr").count() == losses
        assert set(page.locator("table.episodes .outcome").all_inner_texts()) == {"loss"}
        # While a run is being played, its page follows it.
        with WanderClient(live.url) as client:
            [game] = client.create("tictactoe", example=9, run=RUN)
            game.step(f"<move>{game.info['board'].index('.')}</move>")
            client.delete(game.id)
        page.wait_for_function(
            "document.querySelector('[data-field=episodes]').textContent.startsWith('10 (')"
        )
        assert "1 aborted" in page.locator("[data-field=episodes]").inner_text()


def test_a_replay_steps_move_by_move_to_the_archived_final_board(
    browser: Any, live: ServiceProcess, demo: str
) -> None:
    with WanderClient(live.url) as client:
        [record] = [e for e in client.episodes(RUN, limit=100).episodes if e.id == demo]
    assistant = [m.content for m in record.messages if m.role == "assistant"]
    with tab(browser) as page:
        page.goto(f"{live.url}/console/#/run/{RUN.replace('/', '%2F')}")
        page.get_by_role("link", name=demo).click()
        page.wait_for_selector("main .board")
        assert page.locator(".moves .invalid").count() == 1  # the move on the opponent's cell
        page.keyboard.press("Home")
        assert board_of(page) == "........."
        boards = [board_of(page)]
        while page.get_by_role("button", name="Next move").is_enabled():
            page.keyboard.press("ArrowRight")
            boards.append(board_of(page))
        assert boards[-1] == record.state["board"]
        # every position differs from the one before by one mark, but the invalid move's
        assert sum(a != b for a, b in itertools.pairwise(boards)) == len(boards) - 2
        thoughts = page.locator(".moves .think").all_inner_texts()
        assert thoughts == [THINK.search(text or "")[1] for text in assistant]  # type: ignore[index]
        page.keyboard.press("ArrowLeft")
        assert board_of(page) == boards[-2]
        assert page.locator(".episode-id").inner_text() == demo
        total = page.locator("[data-field=score-total]").get_attribute("data-value")
        assert float(total or "nan") == record.score.total  # type: ignore[union-attr]


def test_a_game_played_by_clicking_is_scored_and_archived(
    browser: Any, live: ServiceProcess
) -> None:
    with tab(browser) as page:
        page.goto(f"{live.url}/console/#/play")
        page.fill("input[name=run]", PLAYED)
        page.fill("input[name=seed]", "5")
        page.get_by_role("button", name="Start").click()
        score = page.locator("[data-field=score-total]")
        moves = 0
        while not score.count():
            page.locator(".game .board button:enabled").first.click()
            moves += 1
            page.wait_for_function(
                f"document.querySelectorAll('.game .message.assistant').length === {moves}"
            )
            page.wait_for_selector(".game .board button:enabled, [data-field=score-total]")
        episode = page.locator("[data-episode]").get_attribute("data-episode")
        api = httpx.get(f"{live.url}/v1/episodes/{episode}/score").json()
        assert float(score.get_attribute("data-value") or "nan") == api["total"]
        assert float(score.inner_text()) == pytest.approx(api["total"], abs=5e-5)
        assert api["done"] and moves == api["metrics"]["turns"]
        with WanderClient(live.url) as client:
            archived(client, PLAYED, 1)
            assert client.episodes(PLAYED).episodes[0].id == episode


def test_a_63_bit_seed_is_sent_and_shown_to_the_last_digit(
    browser: Any, live: ServiceProcess
) -> None:
    """JavaScript numbers hold 53 bits: a seed pasted into Play starts that very seed's
    game, and the replay page shows it whole."""
    seed = 2414846885924585508  # 2414846885924585500 as a number
    with tab(browser) as page:
        page.goto(f"{live.url}/console/#/play")
        page.fill("input[name=seed]", str(seed))
        page.get_by_role("button", name="Start").click()
        heading = page.locator("[data-episode]")
        heading.wait_for()
        episode = heading.get_attribute("data-episode")
        assert f"seed {seed} " in heading.inner_text()
        assert httpx.get(f"{live.url}/v1/episodes/{episode}").json()["seed"] == seed
        page.goto(f"{live.url}/console/#/episode/{episode}")
        page.wait_for_selector(".episode-id")
        assert f"seed {seed} " in page.locator("body").inner_text()


def test_the_live_page_shows_steps_live_episodes_and_errors_by_code(
    browser: Any, live: ServiceProcess
) -> None:
    with tab(browser) as page:
        page.goto(f"{live.url}/console/#/live")
        page.wait_for_selector("[data-field=steps-rate]")
        with WanderClient(live.url) as client:
            [playing] = client.create("tictactoe", example=1)
            for _ in range(3):
                [game] = client.create("tictactoe", example=2)
                while not game.done:
                    game.step(f"<move>{game.info['board'].index('.')}</move>")
            assert httpx.get(f"{live.url}/v1/episodes/ep_nope").status_code == 404
            page.wait_for_function(
                "Number(document.querySelector('[data-field=steps-rate]').textContent) > 0"
            )
            page.wait_for_selector("tr[data-code=episode_not_found]")
            live = page.locator("tr[data-env=tictactoe] td").nth(3).inner_text()
            assert int(live) >= 1  # the game left open
            client.delete(playing.id)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """A service with three keys, each tenant with a run, behind deploy/'s nginx where
    nginx is installed: its URL, and the keys by name."""
    folder = tmp_path_factory.mktemp("keyed")
    database = f"sqlite:///{folder}/archive.db"
    upgrade(database)
    keys = {"acme": "wdr_acme-trainer", "globex": "wdr_globex-trainer", "admin": "wdr_ops-admin"}
    env = {
        "WANDER_DATABASE_URL": database,
        "WANDER_REDIS_URL": "",
        "WANDER_API_KEYS": f"acme:trainer:{keys['acme']},globex:trainer:{keys['globex']},"
        f"ops:admin:{keys['admin']}",
    }
    process = ServiceProcess(env).start()
    try:
        for tenant in ("acme", "globex"):
            with WanderClient(process.url, keys[tenant]) as client:
                [episode] = client.create("tictactoe", example=0, run=f"{tenant}-run")
                while not episode.done:
                    episode.step(f"<move>{episode.info['board'].index('.')}</move>")
                archived(client, f"{tenant}-run", 1)
        with WanderClient(process.url, keys["acme"]) as client:
            [unlabelled] = client.create("tictactoe", example=0)
            unlabelled.delete()
            wait_until(lambda: client.runs().unlabelled == 1, "the unlabelled episode archived")
        proxy = nginx(folder / "proxy", process.port, tls=False) if NGINX else nullcontext()
        with proxy as through:
            yield (through.http if through else process.url), keys
    finally:
        process.stop()


def test_with_keys_the_console_asks_for_one_and_shows_only_its_tenant(
    browser: Any, keyed: tuple[str, dict[str, str]]
) -> None:
    url, keys = keyed
    refused = re.compile(r"status of 40[13]")  # the answers that make the page ask for a key
    with tab(browser, allowed=lambda error: bool(refused.search(error))) as page:
        page.goto(f"{url}/console/")
        page.wait_for_selector("form.key-form")
        assert "wants an API key" in page.locator("main").inner_text()
        page.fill("form.key-form input", keys["acme"])
        page.get_by_role("button", name="Use key").click()
        page.wait_for_selector("table.runs")
        assert page.locator("table.runs tbody tr").all_inner_texts()[0].startswith("acme-run")
        assert page.locator("table.runs tbody tr").count() == 1  # not globex's run
        assert (
            "1 archived episode has no run label of tenant acme, so it is in no run"
            in page.locator("main").inner_text()
        )
        page.goto(f"{url}/console/#/live")
        page.wait_for_selector(".notice.error")
        assert "only an admin key" in page.locator("main").inner_text()
        page.get_by_role("button", name="Forget key").click()
        page.fill("form.key-form input", keys["admin"])
        page.get_by_role("button", name="Use key").click()
        page.wait_for_selector("[data-field=live-episodes]")
        page.goto(f"{url}/console/#/runs")
        page.wait_for_selector("table.runs")
        assert page.locator("table.runs tbody tr").count() == 2  # an admin sees every tenant


def test_the_console_is_served_to_anyone_and_turned_off_by_its_setting(sqlite_url: str) -> None:
    """Its pages hold no data, so a keyed service serves them without a key (the page then
    asks for one); ``WANDER_CONSOLE=false`` serves nothing there. (Starlette's TestClient,
    which runs the app on a thread of its own: Playwright holds this thread's loop.)"""
    upgrade(sqlite_url)
    keyed = Settings(redis_url=None, database_url=sqlite_url, api_keys="t:admin:wdr_console")
    with TestClient(create_app(keyed), follow_redirects=False) as api:
        assert api.get("/v1/runs").status_code == 401
        moved = api.get("/console")
        assert moved.status_code == 308 and moved.headers["location"] == "console/"
        page = api.get("/console/")
        assert page.status_code == 200 and '<script type="module" src="app.js">' in page.text
        script = api.get("/console/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
    with TestClient(create_app(keyed.model_copy(update={"console": False}))) as api:
        for path in ("/console", "/console/", "/console/app.js"):
            assert api.get(path).status_code == 404


def test_wander_serve_no_console(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path}/archive.db"
    upgrade(database)
    env = {"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": ""}
    process = ServiceProcess(env, ("serve", "--no-console")).start()
    try:
        assert httpx.get(f"{process.url}/console/").status_code == 404
        assert httpx.get(f"{process.url}/v1/environments").status_code == 200
    finally:
        process.stop()


def test_a_tool_environment_is_played_with_tool_calls_and_a_typed_answer(
    browser: Any, live: ServiceProcess
) -> None:
    with tab(browser) as page:
        page.goto(f"{live.url}/console/#/play")
        page.select_option("select[name=env]", "sql")
        page.fill("input[name=example]", "1")
        page.get_by_role("button", name="Start").click()
        page.select_option("select[name=tool]", "run_sql")
        page.fill("textarea[name=arguments]", '{"query": "SELECT COUNT(*) FROM customers"}')
        page.get_by_role("button", name="Call tool").click()
        page.wait_for_selector(".game .message.tool")
        assert "COUNT(*)" in page.locator(".game .message.tool").inner_text()
        page.fill("textarea[name=action]", "<answer>0</answer>")
        page.get_by_role("button", name="Send").click()
        score = page.locator("[data-field=score-total]")
        score.wait_for()
        episode = page.locator("[data-episode]").get_attribute("data-episode")
        api = httpx.get(f"{live.url}/v1/episodes/{episode}/score").json()
        assert float(score.get_attribute("data-value") or "nan") == api["total"]
        assert api["metrics"]["tool_calls"] == 1


def test_reverse_text_and_sql_replays_show_what_the_model_was_asked_and_did(
    browser: Any, live: ServiceProcess
) -> None:
    with WanderClient(live.url) as client:
        [reverse] = client.create("reverse_text", example=0, run="generic")
        text = reverse.info["text"]
        reverse.step(f"<reversed_text>{text[::-1]}</reversed_text>")
        [sql] = client.create("sql", example=0, run="generic")
        query = json.dumps({"query": "SELECT 6 * 7"})
        call = {"id": "call_0", "type": "function",
                "function": {"name": "run_sql", "arguments": query}}  # fmt: skip
        sql.step(AssistantMessage.model_validate({"content": None, "tool_calls": [call]}))
        sql.step("<answer>42</answer>")
        archived(client, "generic", 2)
    with tab(browser) as page:
        page.goto(f"{live.url}/console/#/episode/{reverse.id}?run=generic")
        page.wait_for_selector(".columns")
        columns = page.locator(".columns pre").all_inner_texts()
        assert columns == [text, text[::-1], text[::-1]]  # the text, its reversal, the answer
        assert page.get_by_text("LCS ratio 1").is_visible()
        page.goto(f"{live.url}/console/#/episode/{sql.id}?run=generic")
        page.wait_for_selector(".queries")
        shown = page.locator(".queries li")
        assert shown.locator("code").inner_text() == "run_sql"
        assert shown.locator("pre").all_inner_texts() == ["SELECT 6 * 7", "6 * 7\n42"]
        assert "Answer: 42" in page.locator("main").inner_text()


def test_every_page_fits_a_phone(browser: Any, live: ServiceProcess, demo: str) -> None:
    """At 390 pixels wide nothing but a table scrolls sideways, and nothing fails."""
    pages = ["#/runs", f"#/run/{RUN}", f"#/episode/{demo}?run={RUN}", "#/play", "#/live"]
    with tab(browser, size=PHONE) as page:
        for address in pages:
            page.goto(f"{live.url}/console/{address}")
            page.wait_for_function("!document.querySelector('main').hasAttribute('aria-busy')")
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE[0], address
