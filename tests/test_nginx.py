"""The compose stack's nginx (``deploy/``), run for real where nginx is installed: plain
HTTP without a certificate (``docker compose up`` as it always was), TLS on top with one
(``compose.tls.yaml``); keys pass through to the service and never reach the log.

The files are the ones compose mounts, with Docker's names swapped for this machine's:
the upstream ``service:8000`` for an echo server (``tests/echo.py``), the ports for free
ones, ``/etc/nginx/`` for a temporary folder. The directives under test are untouched.
For ``docker compose up --scale service=N``, ``service`` stays a name: a stand-in for
Docker's DNS (``tests/resolver.py``) answers it with the addresses of two real
``wander serve`` replicas on one Redis, then of more, as scaling up does.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import websockets
from prometheus_client.parser import text_string_to_metric_families

from bench.loadgen import run_load
from tests.keyed import KEY as KEYED
from tests.keyed import keyed_service
from tests.resolver import Resolver
from wander.client import Unauthorized, WanderClient
from wander.testing import ServiceProcess, free_port

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
OPENSSL = shutil.which("openssl")
KEY = "wdr_never_logged"
IN_QUERY = "wdr_in_a_query"
AUTHORIZATION = {"Authorization": f"Bearer {KEY}"}

pytestmark = pytest.mark.skipif(NGINX is None, reason="no nginx on this machine")


@dataclass(frozen=True)
class Proxy:
    http: str
    https: str
    certificate: Path
    log: Path


@pytest.fixture(scope="module")
def upstream() -> Iterator[ServiceProcess]:
    process = ServiceProcess({}, ("tests.echo:app",), module="uvicorn").start()
    yield process
    process.stop()


def swap(text: str, old: str, new: str) -> str:
    assert old in text, f"deploy/ no longer says {old!r}: update this test"
    return text.replace(old, new)


def local(
    config: Path, etc: Path, upstream: str, http: int, https: int, resolver: str | None
) -> str:
    text = swap(config.read_text(), "http://service:8000", f"http://{upstream}")
    text = swap(text, "/etc/nginx/", f"{etc}/")
    if resolver is not None:  # this machine's stand-in for Docker's DNS, asked every second
        text = swap(text, "resolver 127.0.0.11 valid=5s;", f"resolver {resolver} valid=1s;")
    if "listen 443 ssl;" in text:
        return swap(text, "listen 443 ssl;", f"listen 127.0.0.1:{https} ssl;")
    return swap(text, "listen 8000;", f"listen 127.0.0.1:{http};")


def make_certificate(folder: Path) -> None:
    """A self-signed certificate for 127.0.0.1, as the README's command makes one."""
    if OPENSSL is None:
        pytest.skip("no openssl to make a certificate with")
    folder.mkdir()
    subprocess.run(
        [OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", folder / "key.pem", "-out", folder / "cert.pem"],
        check=True, capture_output=True,
    )  # fmt: skip


@contextmanager
def nginx(
    folder: Path, upstream: int | str, *, tls: bool, resolver: str | None = None
) -> Iterator[Proxy]:
    """nginx on deploy/nginx.conf, with deploy/nginx-tls.conf and a certificate if ``tls``;
    stopped, and its access log complete, when the block ends. ``upstream`` is a port on
    127.0.0.1, or ``service:PORT`` resolved by the DNS server at ``resolver``."""
    assert NGINX is not None
    etc, http, https = folder / "etc", free_port(), free_port()
    address = f"127.0.0.1:{upstream}" if isinstance(upstream, int) else upstream
    (etc / "wander.d").mkdir(parents=True)
    conf = local(DEPLOY / "nginx.conf", etc, address, http, https, resolver)
    (etc / "nginx.conf").write_text(conf)
    if tls:
        tls_conf = local(DEPLOY / "nginx-tls.conf", etc, address, http, https, None)
        (etc / "wander.d" / "tls.conf").write_text(tls_conf)
        make_certificate(etc / "tls")
    places = f"daemon off; pid {folder}/nginx.pid; error_log {folder}/error.log;"
    command = [NGINX, "-p", str(folder), "-c", str(etc / "nginx.conf"), "-g", places]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    log = folder / "access.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while not _listens(http):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield Proxy(f"http://127.0.0.1:{http}", f"https://127.0.0.1:{https}", etc / "tls", log)
    finally:
        process.terminate()
        process.wait(10)


def _listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


def trusting(proxy: Proxy, version: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    """A client context that trusts the proxy's certificate, held to ``version`` if given."""
    context = ssl.create_default_context(cafile=proxy.certificate / "cert.pem")
    if version is not None:
        context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer even old versions
        context.minimum_version = context.maximum_version = version
    return context


def handshake(proxy: Proxy, context: ssl.SSLContext) -> str | None:
    port = int(proxy.https.rsplit(":", 1)[1])
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        return tls.version()


def seen(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


def assert_no_key_logged(proxy: Proxy, requests: int) -> None:
    """One line per request, the first the one with a key in its query string too."""
    lines = proxy.log.read_text().splitlines()
    assert len(lines) == requests and '"GET /v1/runs HTTP/1.1" 200' in lines[0], lines
    assert not any(KEY in line or IN_QUERY in line for line in lines), lines


def test_without_a_certificate_the_proxy_serves_http_and_passes_the_key_on(
    upstream: ServiceProcess, tmp_path: Path
) -> None:
    with nginx(tmp_path, upstream.port, tls=False) as proxy:
        echo = seen(httpx.get(f"{proxy.http}/v1/runs?key={IN_QUERY}", headers=AUTHORIZATION))
        assert not _listens(int(proxy.https.rsplit(":", 1)[1]))
    assert echo["headers"]["authorization"] == f"Bearer {KEY}"
    assert echo["headers"]["host"] == proxy.http.removeprefix("http://")
    assert echo["headers"]["x-forwarded-for"] == "127.0.0.1"
    assert echo["headers"]["x-forwarded-proto"] == "http"
    assert_no_key_logged(proxy, requests=1)


async def test_with_a_certificate_the_proxy_terminates_tls(
    upstream: ServiceProcess, tmp_path: Path
) -> None:
    with nginx(tmp_path, upstream.port, tls=True) as proxy:
        async with httpx.AsyncClient(verify=trusting(proxy)) as client:
            answer = await client.get(
                f"{proxy.https}/v1/runs?key={IN_QUERY}", headers=AUTHORIZATION
            )
            plain = seen(await client.get(f"{proxy.http}/v1/runs"))
        socket_url = f"wss://127.0.0.1:{proxy.https.rsplit(':', 1)[1]}/openenv/tictactoe/ws"
        async with websockets.connect(
            socket_url, ssl=trusting(proxy), additional_headers=AUTHORIZATION
        ) as session:
            through_socket = json.loads(await session.recv())
        modern = (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
        versions = [handshake(proxy, trusting(proxy, version)) for version in modern]
        with pytest.raises(ssl.SSLError):
            handshake(proxy, trusting(proxy, ssl.TLSVersion.TLSv1_1))
    echo = seen(answer)
    assert answer.headers["strict-transport-security"] == "max-age=63072000"
    assert echo["headers"]["authorization"] == f"Bearer {KEY}"
    assert echo["headers"]["x-forwarded-proto"] == "https"
    assert echo["scheme"] == "https"  # uvicorn believes the proxy (FORWARDED_ALLOW_IPS)
    assert plain["headers"]["x-forwarded-proto"] == "http"  # port 8000 is still there
    assert through_socket["headers"]["authorization"] == f"Bearer {KEY}"
    assert through_socket["path"] == "/openenv/tictactoe/ws"
    assert versions == ["TLSv1.2", "TLSv1.3"]
    assert_no_key_logged(proxy, requests=3)  # the WebSocket's handshake is a GET too


def test_the_client_plays_through_the_tls_proxy_with_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's recipe: a service that wants a key, TLS at the proxy, and a client
    that trusts a self-signed certificate through SSL_CERT_FILE."""
    (tmp_path / "service").mkdir()
    service = keyed_service(tmp_path / "service")
    try:
        with nginx(tmp_path / "proxy", service.port, tls=True) as proxy:
            monkeypatch.setenv("SSL_CERT_FILE", str(proxy.certificate / "cert.pem"))
            with WanderClient(proxy.https, KEYED) as wander:
                [episode] = wander.create("tictactoe", example=0)
                assert episode.step("<move>4</move>").turn == 1
            with WanderClient(proxy.https) as keyless, pytest.raises(Unauthorized):
                keyless.episode(episode.id)
    finally:
        service.stop()


@pytest.fixture
def replicas(redis_url: str, redis_prefix: str, tmp_path: Path) -> Iterator[list[ServiceProcess]]:
    """Two ``wander serve`` on one Redis and one archive, as ``--scale service=2`` runs
    them: one port on two addresses (127.0.0.1 and 127.0.0.2, as on two containers)."""
    env = {"WANDER_REDIS_URL": redis_url, "WANDER_REDIS_PREFIX": redis_prefix,
           "WANDER_DATABASE_URL": f"sqlite:///{tmp_path}/archive.db"}  # fmt: skip
    port, started = free_port(), []
    try:
        for host in ("127.0.0.1", "127.0.0.2"):  # one after the other: one migrates
            started.append(ServiceProcess(env, host=host, port=port).start())
        yield started
    finally:
        for process in started:
            process.stop()


def worker(url: str) -> str:
    """The pid of the process that answers at ``url`` (its X-Wander-Worker header)."""
    answer = httpx.get(f"{url}/healthz")
    assert answer.status_code == 200, answer.text
    return answer.headers["x-wander-worker"]


def served_by(proxy: Proxy, requests: int) -> Counter[str]:
    return Counter(worker(proxy.http) for _ in range(requests))


def steps(process: ServiceProcess) -> float:
    """The steps this process applied, by its own /metrics."""
    text = httpx.get(f"{process.url}/metrics").text
    [family] = [f for f in text_string_to_metric_families(text) if f.name == "wander_steps"]
    return sum(sample.value for sample in family.samples if sample.name == "wander_steps_total")


async def test_the_proxy_spreads_requests_over_the_replicas_as_they_come_and_go(
    replicas: list[ServiceProcess], tmp_path: Path
) -> None:
    first, second = replicas
    with (
        Resolver("service", [first.host]) as dns,
        nginx(tmp_path, f"service:{first.port}", tls=False, resolver=dns.address) as proxy,
    ):
        alone = served_by(proxy, 20)
        dns.addresses = [first.host, second.host]  # the second replica comes up
        await asyncio.sleep(1.5)  # the proxy asks the DNS again once its answer is 1 s old
        both = served_by(proxy, 40)
        rest = await run_load(proxy.http, agents=4, seconds=1.0, mode="single", batch=1,
                              opponent="random")  # fmt: skip
        sessions = await run_load(f"{proxy.http}/openenv/tictactoe", agents=2, seconds=1.0,
                                  mode="ws", batch=1, opponent="random")  # fmt: skip
        pids, stepped = [worker(first.url), worker(second.url)], [steps(first), steps(second)]
        second.stop()  # scaled down: until the DNS forgets it, the proxy tries the next one
        left = served_by(proxy, 20)
    assert alone == {pids[0]: 20}
    assert set(both) == set(pids), both
    # Episodes created on one replica are played on by either: they live in Redis.
    assert rest.errors == 0 and rest.episodes > 0
    assert sessions.errors == 0 and sessions.episodes >= 2  # WebSockets through the proxy
    assert min(stepped) > 0 and sum(stepped) >= rest.steps + sessions.steps
    assert left == {pids[0]: 20}
