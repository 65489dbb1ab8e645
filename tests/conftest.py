"""Shared fixtures: a real Redis (the machine's, or one started for the suite), the
archive on SQLite and on a real PostgreSQL, and the service over FastAPI's ASGI
transport on either store.

The suite leaves nothing behind, and checks it when it ends (tests/leaks.py): a run
that leaves a process, a listening port, a Redis key or a database fails, naming it.
Redis tests use database 15 of the local Redis (``WANDER_TEST_REDIS_URL`` picks
another), never database 0 where a development service keeps its episodes; every key
is under a prefix of the test's own, ``wander-test:<session>:<test>:``, deleted after
the test. PostgreSQL tests create a database per test, ``wander_test_<session>_...``,
and drop it.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType
from typing import Any

import httpx
import pytest
import pytest_asyncio
import redis
import sqlalchemy
from asgi_lifespan import LifespanManager
from starlette.types import ASGIApp

from tests.helpers import SQLITE_TEMPLATE, asgi_client, migrate, write_archive
from tests.leaks import LEDGER, MARKER, Ledger
from tests.records import many_runs
from tests.redis_cluster import start_cluster
from wander.service.app import create_app
from wander.service.archive.migrations import upgrade
from wander.service.redis_url import parse_redis_url
from wander.service.settings import Settings
from wander.service.store.targets import primaries
from wander.testing import ServiceProcess, free_port

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"
"""A database of its own: the suite never touches database 0, a development service's."""
DEFAULT_POSTGRES_URL = "postgresql+psycopg://127.0.0.1:5432/test"


FAST_TIER = "not slow and not live_server and not interop and not browser"
"""The tests ``--fast`` selects: the unit and ASGI tests."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast", action="store_true",
        help=f"only the fast tier ({FAST_TIER}): `make test-fast`. The modules that hold "
        "only slow or interop tests are not even imported.",
    )  # fmt: skip


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if config.getoption("fast") and collection_path.stem in SLOW_MODULES | INTEROP_MODULES:
        return True
    return None  # pytest decides


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("fast"):
        chosen = config.option.markexpr
        config.option.markexpr = f"({chosen}) and ({FAST_TIER})" if chosen else FAST_TIER
    ledger = config.stash[LEDGER] = Ledger()
    os.environ[MARKER] = ledger.session  # inherited by every process the session starts
    # Services write their archive from a thread, sparing each a writer process (~0.8 s
    # of CPU to start); the tests of that process ask for it (ARCHIVE_PROCESS).
    os.environ.setdefault("WANDER_ARCHIVE_WRITER", "thread")


def _distributes(config: pytest.Config) -> bool:
    """Whether this process hands the tests out to pytest-xdist's workers (``-n``) and
    runs none itself (known once every plugin is configured)."""
    return config.pluginmanager.has_plugin("dsession")


@pytest.hookimpl(trylast=True)  # after the session's fixtures are torn down
def pytest_sessionfinish(session: pytest.Session) -> None:
    if _distributes(session.config):
        return  # each of pytest-xdist's workers is a session of its own, checked by itself
    leaks = session.config.stash[LEDGER].leaks()
    if not leaks:
        return
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "the test session left these behind", red=True)
        for leak in leaks:
            reporter.write_line(leak.what)
    for leak in leaks:
        if leak.remove is not None:
            leak.remove()


SERVER_STARTERS = frozenset({"ServiceProcess", "plugin_service", "keyed_service"})
"""What starts a real ``wander serve`` (a process, seconds to start): a test that calls one,
itself or through its fixtures and the helpers of tests/ they call, is ``live_server``."""
INTEROP_MODULES = frozenset(
    {"test_openenv_interop", "test_verifiers", "test_hosted_openenv", "test_hosted_verifiers",
     "test_vllm_server"}
)  # fmt: skip
"""Tests against another project's real package, in a venv of its own (tests/interop.py)."""
SLOW_MODULES = frozenset({
    "test_bench_scaling", "test_bench_ws", "test_client_install", "test_cluster",
    "test_gradients", "test_grpo", "test_multiprocess", "test_nginx", "test_packaging",
    "test_plain_sampling", "test_rollout", "test_sandbox", "test_sft", "test_sharded",
    "test_untrusted_code", "test_vllm_backend", "test_worker_isolation",
})  # fmt: skip
"""Modules whose tests take more than ~5 s each (setup and call, on a 2-core machine), or
whose many 1-2 s tests take half a minute together."""
SLOW_TESTS = frozenset({
    "tests/test_leaks.py::test_a_session_that_cleans_up_after_a_kill_9_of_several_workers_passes",
    "tests/test_no_evaluation.py::test_no_constant_answer_scores_every_item",
    "tests/test_no_evaluation.py::test_the_audit_finds_exactly_the_datasets_that_evaluate",
    "tests/test_no_evaluation.py::test_wanders_scoring_compiles_nothing[puzzle24]",
    "tests/test_rg_scoring_expressions.py::test_scores_are_reasoning_gyms[countdown]",
    "tests/test_rg_scoring_expressions.py::test_scores_are_reasoning_gyms[intermediate_integration]",
    "tests/test_rg_scoring_expressions.py::test_scores_are_reasoning_gyms[polynomial_multiplication]",
    "tests/test_rg_scoring_expressions.py::test_scores_are_reasoning_gyms[puzzle24]",
    "tests/test_rg_scoring_expressions.py::test_scores_are_reasoning_gyms[simple_integration]",
    "tests/test_sql_limits.py::test_the_slowest_rows_allowed_still_end_within_the_budget",
    "tests/test_store_contract.py::test_expired_episodes_give_their_quota_back",
})  # fmt: skip
"""Slow tests in otherwise fast modules, by id, or by name for all its parameters
(``--durations`` finds them)."""
Verdicts = dict[Callable[..., Any], bool]
"""Whether a function starts a server, as `_starts_a_server` found."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers (pyproject.toml's markers), given here rather than in each test file:
    ``make test-fast`` runs what carries none of them."""
    verdicts: Verdicts = {}
    for item in items:
        module = item.path.stem
        if module in INTEROP_MODULES:
            item.add_marker(pytest.mark.interop)
        if module in SLOW_MODULES or {item.nodeid, item.nodeid.split("[")[0]} & SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        if "browser" in info.names_closure:
            item.add_marker(pytest.mark.browser)
        functions = [getattr(item, "obj", None)]
        functions += [defs[-1].func for defs in info.name2fixturedefs.values() if defs]
        if any(_starts_a_server(f, verdicts) for f in functions if f is not None):
            item.add_marker(pytest.mark.live_server)
    items.sort(key=_heaviest_first)


LONG_MODULES = ("test_store_contract", "test_cli", "test_ops", "test_runs_api", "test_dead_letters")
"""Modules of fast tests that take 10-35 s together (the store contract's TTLs wait in
real time): handed out first among the fast ones."""


def _heaviest_first(item: pytest.Item) -> int:
    """The interop modules, then the slow ones, then the long ones, then the rest, each in
    file order: with pytest-xdist handing out whole files in this order (``make test``),
    the longest start first and the short ones fill in behind, so that no process ends
    long after the others."""
    module = item.path.stem
    tiers = (INTEROP_MODULES, SLOW_MODULES, LONG_MODULES)
    return next((rank for rank, tier in enumerate(tiers) if module in tier), len(tiers))


def _starts_a_server(function: Callable[..., Any], verdicts: Verdicts) -> bool:
    """Whether ``function`` names a `SERVER_STARTERS`, or calls a function of tests/ that does."""
    function = inspect.unwrap(function)
    if function in verdicts:
        return verdicts[function]
    verdicts[function] = False  # a recursion meets it undecided
    code = getattr(function, "__code__", None)
    found = False
    if code is not None:
        scope = getattr(function, "__globals__", {})
        for name in _names(code):
            called = scope.get(name)
            if name in SERVER_STARTERS or (
                inspect.isfunction(called)
                and called.__module__.startswith("tests")
                and _starts_a_server(called, verdicts)
            ):
                found = True
                break
    verdicts[function] = found
    return found


def _names(code: CodeType) -> set[str]:
    """The global names ``code`` reads, in its nested functions too."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, CodeType):
            names |= _names(constant)
    return names


def _redis_answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


@pytest.fixture(scope="session")
def redis_url(pytestconfig: pytest.Config) -> Iterator[str]:
    """The Redis to test against: ``WANDER_TEST_REDIS_URL``, the local one, or one we start.

    Skips (saying why) only when none answers and no ``redis-server`` is installed.
    """
    url = os.environ.get("WANDER_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    if _redis_answers(url):
        pytestconfig.stash[LEDGER].use_redis(url)
        yield url
        return
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip(f"no Redis at {url} and no redis-server to start: Redis tests skipped")
    port = free_port()
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/15"
    deadline = time.monotonic() + 10
    while not _redis_answers(url):
        if time.monotonic() > deadline:
            server.kill()
            server.wait()
            pytest.fail(f"started redis-server on port {port}, but it never answered")
        time.sleep(0.05)
    yield url
    server.terminate()
    server.wait()


@pytest.fixture(scope="session")
def redis_cluster_url() -> Iterator[str]:
    """A Redis Cluster of three primaries the session starts (``redis+cluster://``), and
    stops with its files at the end. Skips, saying so, where no redis-server is installed."""
    with tempfile.TemporaryDirectory(prefix="wander-cluster-") as directory:
        cluster = start_cluster(Path(directory))
        try:
            yield cluster.url
        finally:
            cluster.stop()


@contextmanager
def redis_keys(redis_url: str, config: pytest.Config) -> Iterator[str]:
    """A key prefix of its own in the session's namespace, its keys deleted afterwards
    (on every primary of a cluster)."""
    prefix = f"{config.stash[LEDGER].redis_namespace}{uuid.uuid4().hex}:"
    yield prefix
    for _, client in primaries(parse_redis_url(redis_url)):
        with client:
            keys = list(client.scan_iter(match=f"{prefix}*"))
            for key in keys:  # one by one: a cluster's keys are in many slots
                client.delete(key)


@pytest.fixture(scope="session")
def postgres_server_url(pytestconfig: pytest.Config) -> str:
    """A PostgreSQL we may create databases on: ``WANDER_TEST_POSTGRES_URL`` or the local one."""
    url = os.environ.get("WANDER_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    engine = sqlalchemy.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.OperationalError as exc:
        pytest.skip(f"no PostgreSQL at {url} ({exc.orig}): PostgreSQL archive tests skipped")
    finally:
        engine.dispose()
    pytestconfig.stash[LEDGER].postgres_url = url
    return url


@contextmanager
def postgres_database(server_url: str, name: str, template: str = "") -> Iterator[str]:
    """The URL of a database ``name`` created on the server (a copy of ``template``, if
    named), dropped afterwards."""
    admin = sqlalchemy.create_engine(server_url, isolation_level="AUTOCOMMIT")
    copy = f' TEMPLATE "{template}"' if template else ""
    with admin.connect() as connection:
        connection.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"{copy}'))
    try:
        yield (
            sqlalchemy.make_url(server_url).set(database=name).render_as_string(hide_password=False)
        )
    finally:
        with admin.connect() as connection:
            connection.execute(sqlalchemy.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def _test_database(config: pytest.Config) -> str:
    return f"{config.stash[LEDGER].database_prefix}{uuid.uuid4().hex[:12]}"


@pytest.fixture
def postgresql_url(postgres_server_url: str, pytestconfig: pytest.Config) -> Iterator[str]:
    """An empty database of this test's own on the PostgreSQL server, dropped afterwards."""
    with postgres_database(postgres_server_url, _test_database(pytestconfig)) as url:
        yield url


@pytest.fixture(scope="session")
def postgres_template(postgres_server_url: str, pytestconfig: pytest.Config) -> Iterator[str]:
    """A database that Alembic migrated to the head revision once per session: a test's
    migrated database is created as a copy of it (``CREATE DATABASE ... TEMPLATE``)."""
    name = f"{pytestconfig.stash[LEDGER].database_prefix}template"
    with postgres_database(postgres_server_url, name) as url:
        upgrade(url)
        yield name


@pytest.fixture
def migrated_postgresql_url(
    postgres_server_url: str, postgres_template: str, pytestconfig: pytest.Config
) -> Iterator[str]:
    """A database of this test's own migrated to the head revision, dropped afterwards."""
    name = _test_database(pytestconfig)
    with postgres_database(postgres_server_url, name, postgres_template) as url:
        yield url


@pytest.fixture(scope="session", autouse=True)
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A SQLite archive that Alembic migrated to the head revision once per session:
    ``helpers.migrate`` makes a test's archive a copy of it (0.1-0.18 s saved each time)."""
    path = tmp_path_factory.mktemp("template") / "archive.db"
    upgrade(f"sqlite:///{path}")
    SQLITE_TEMPLATE["head"] = path
    yield path
    SQLITE_TEMPLATE.clear()


@pytest.fixture
def sqlite_url(tmp_path: os.PathLike[str]) -> str:
    return f"sqlite:///{tmp_path}/archive.db"


@pytest.fixture
def migrated_sqlite_url(sqlite_url: str) -> str:
    migrate(sqlite_url)
    return sqlite_url


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest) -> str:
    """An empty archive database: SQLite, then a real PostgreSQL."""
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str:
    """A migrated archive database, on SQLite and on PostgreSQL: a copy of the session's
    migrated template, or, in a module that sets ``REAL_MIGRATIONS`` (the tests of the
    migrations), migrated by Alembic for the test."""
    if getattr(request.module, "REAL_MIGRATIONS", False):
        url = str(request.getfixturevalue(f"{request.param}_url"))
        upgrade(url)
        return url
    return str(request.getfixturevalue(f"migrated_{request.param}_url"))


STORE_KINDS = ("memory", "redis")
"""The stores a test that takes ``store_kind`` runs on: the in-process store and a real
Redis. A module that sets ``STORE_KINDS`` of its own runs on those instead, e.g. with
``"cluster"``, the session's Redis Cluster."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    chosen = any(
        "store_kind" in mark.args[0] for mark in metafunc.definition.iter_markers("parametrize")
    )  # a test that names its own stores runs on those
    if "store_kind" in metafunc.fixturenames and not chosen:
        # A module's shared service is one per store: its tests are grouped by store.
        shared = getattr(metafunc.module, "SHARED_SERVICE", False)
        scope = "module" if shared or "shared_api" in metafunc.fixturenames else "function"
        kinds = getattr(metafunc.module, "STORE_KINDS", STORE_KINDS)
        metafunc.parametrize("store_kind", kinds, scope=scope)


@pytest.fixture
def redis_prefix(redis_url: str, pytestconfig: pytest.Config) -> Iterator[str]:
    """A key prefix of this test's own on ``redis_url``, deleted afterwards."""
    with redis_keys(redis_url, pytestconfig) as prefix:
        yield prefix


@pytest.fixture
def cluster_prefix(redis_cluster_url: str, pytestconfig: pytest.Config) -> Iterator[str]:
    """A key prefix of this test's own on the session's cluster, deleted afterwards."""
    with redis_keys(redis_cluster_url, pytestconfig) as prefix:
        yield prefix


@pytest.fixture
def shared_redis(store_kind: str, request: pytest.FixtureRequest) -> tuple[str, str]:
    """The URL of the Redis (``redis``) or Redis Cluster (``cluster``) that ``store_kind``
    names, and a key prefix of the test's own there."""
    if store_kind == "cluster":
        return request.getfixturevalue("redis_cluster_url"), request.getfixturevalue(
            "cluster_prefix"
        )
    return request.getfixturevalue("redis_url"), request.getfixturevalue("redis_prefix")


@pytest.fixture
def settings(store_kind: str, sqlite_url: str, request: pytest.FixtureRequest) -> Settings:
    """Settings for the parametrised store, with a migrated SQLite archive of the test's own."""
    migrate(sqlite_url)
    if store_kind in ("redis", "cluster"):
        url, prefix = request.getfixturevalue("shared_redis")
        return Settings(redis_url=url, redis_prefix=prefix, database_url=sqlite_url)
    return Settings(redis_url=None, database_url=sqlite_url)


@pytest.fixture(scope="module")
def module_settings(
    store_kind: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Settings]:
    """Like ``settings``, for the one service a module's tests share (``shared_api``):
    a migrated SQLite archive and a key prefix of the module's own."""
    database = f"sqlite:///{tmp_path_factory.mktemp('shared')}/archive.db"
    migrate(database)
    if store_kind == "memory":
        yield Settings(redis_url=None, database_url=database)
        return
    url = request.getfixturevalue("redis_cluster_url" if store_kind == "cluster" else "redis_url")
    with redis_keys(url, request.config) as prefix:
        yield Settings(redis_url=url, redis_prefix=prefix, database_url=database)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_api(module_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client of one service on the parametrised store, shared by the tests of a module
    that need no service of their own: starting one (its fork server above all, ~2 s of
    CPU) for each test was most of what such tests cost. Each test still plays episodes
    of its own. A module opts in with ``SHARED_SERVICE = True`` (its tests' ``api`` is
    then this one), running its tests in the module's event loop, where the service runs
    (``pytestmark = IN_THE_SHARED_LOOP``, tests/helpers.py)."""
    async with asgi_client(create_app(module_settings)) as client:
        yield client


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[ASGIApp]:
    """The service on the parametrised store, started and stopped around the test."""
    async with LifespanManager(create_app(settings)) as manager:
        yield manager.app


@pytest.fixture
def api(store_kind: str, request: pytest.FixtureRequest) -> httpx.AsyncClient:
    """An HTTP client for the service on the parametrised store: the one the module's
    tests share where it sets ``SHARED_SERVICE`` (``shared_api``), else one of the test's
    own (``own_api``)."""
    shared = getattr(request.module, "SHARED_SERVICE", False)
    client: httpx.AsyncClient = request.getfixturevalue("shared_api" if shared else "own_api")
    return client


@pytest.fixture
async def own_api(app: ASGIApp) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client for a service started for the test, on the parametrised store."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://wander.test") as client:
        yield client


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """A real `wander serve` (in-process store, SQLite archive), shared by a test module."""
    database = f"sqlite:///{tmp_path_factory.mktemp('live')}/archive.db"
    migrate(database)
    process = ServiceProcess({"WANDER_DATABASE_URL": database, "WANDER_REDIS_URL": ""}).start()
    yield process
    process.stop()


@pytest.fixture
def runs_service(sqlite_url: str) -> Iterator[ServiceProcess]:
    """A real `wander serve` (in-process store) over a SQLite archive holding ``many_runs(10)``."""
    migrate(sqlite_url)
    write_archive(sqlite_url, many_runs(10))
    process = ServiceProcess({"WANDER_DATABASE_URL": sqlite_url, "WANDER_REDIS_URL": ""}).start()
    yield process
    process.stop()


PLUGIN = Path(__file__).parent / "plugin"


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plugin package (tests/plugin) installed in a folder of its own, for
    service processes started with it on PYTHONPATH."""
    target = tmp_path_factory.mktemp("plugin-site")
    # Built from a copy: setuptools builds in the source folder, where another test
    # process (pytest-xdist's) may be building it at the same moment.
    source = shutil.copytree(PLUGIN, tmp_path_factory.mktemp("plugin") / "source",
                             ignore=shutil.ignore_patterns("build", "*.egg-info"))  # fmt: skip
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
         str(source)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr
    return target


@pytest.fixture
async def client(service: ServiceProcess) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the requesting module's ``service`` fixture (a real ``wander
    serve`` it starts with settings of its own)."""
    async with httpx.AsyncClient(base_url=service.url, timeout=60) as http:
        yield http
