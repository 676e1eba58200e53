"""Chroma's token: the orchestrator's and the indexer's clients send it, the token check refuses
requests without it.

A real Chroma server (``chroma run``, as the embedded runner starts it) listens on loopback behind
the token check of deploy/k8s/stores/chroma-auth.conf.template, run by a real nginx when one is
installed. The clients are built by the services' own code (``orchestrator.retrieval``,
``indexer.store``) from ``CHROMA_AUTH_TOKEN``: with the token they create, write and query; without
it, or with another, every call is refused; the heartbeat stays open for health checks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from string import Template

import httpx
import pytest

from contracts.settings import ServiceSettings
from deploy.runner import free_port
from tests.support.chromium import TestEnvironment

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "deploy" / "k8s" / "stores" / "chroma-auth.conf.template"
TOKEN = "9f2c1e7a4b6d8f0e3a5c7b9d1f2e4a6c"


def wait_until_up(url: str, process: subprocess.Popen[bytes], timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited with {process.returncode}"
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise AssertionError(f"{url} did not answer")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@pytest.fixture(scope="module")
def chroma(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A Chroma server on loopback; yields its port."""
    folder = tmp_path_factory.mktemp("chroma")
    port = free_port()
    command = [str(Path(sys.executable).with_name("chroma")), "run", "--path", str(folder)]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    log = (folder / "chroma.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until_up(f"http://127.0.0.1:{port}/api/v2/heartbeat", process)
        yield port
    finally:
        stop(process)
        log.close()


def nginx_binary() -> str | None:
    return shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


@pytest.fixture(scope="module")
def token_check(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """nginx with the deployed template (the token filled in as nginx's image does, the ports
    moved to free ones); yields the port clients connect to."""
    binary = nginx_binary()
    if binary is None:
        why = "nginx is not installed (deployments run it from its image; make test installs it)"
        if TestEnvironment().ci:
            pytest.fail(why)  # CI=true: a green run has run the token check
        pytest.skip(why)
    chroma: int = request.getfixturevalue("chroma")
    folder = tmp_path_factory.mktemp("nginx")
    port = free_port()
    # What the image's entrypoint does: substitute the environment's variables, only those.
    site = Template(TEMPLATE.read_text(encoding="utf-8")).safe_substitute(CHROMA_AUTH_TOKEN=TOKEN)
    assert "listen 8000;" in site
    assert "http://127.0.0.1:8001" in site
    site = site.replace("listen 8000;", f"listen 127.0.0.1:{port};")
    site = site.replace("http://127.0.0.1:8001", f"http://127.0.0.1:{chroma}")
    (folder / "site.conf").write_text(site, encoding="utf-8")
    temp = {name: folder / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir()
    (folder / "nginx.conf").write_text(
        f"""daemon off;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"};
events {{}}
http {{
    access_log off;
    client_body_temp_path {temp["body"]};
    proxy_temp_path {temp["proxy"]};
    fastcgi_temp_path {temp["fastcgi"]};
    uwsgi_temp_path {temp["uwsgi"]};
    scgi_temp_path {temp["scgi"]};
    include {folder / "site.conf"};
}}
""",
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [binary, "-p", str(folder), "-c", str(folder / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{port}/api/v2/heartbeat", process, timeout=20)
        yield port
    finally:
        stop(process)


def settings(port: int, token: str | None) -> ServiceSettings:
    values: dict[str, object] = {"chroma_host": "127.0.0.1", "chroma_port": port}
    if token is not None:
        values["chroma_auth_token"] = token
    return ServiceSettings.model_validate(values)


def test_without_a_token_the_clients_send_no_auth_settings() -> None:
    assert ServiceSettings().chroma_client_settings() == {}
    configured = settings(8000, TOKEN).chroma_client_settings()
    assert configured["chroma_client_auth_credentials"] == TOKEN
    assert configured["chroma_auth_token_transport_header"] == "X-Chroma-Token"


def test_the_services_clients_work_with_the_token(token_check: int) -> None:
    from indexer.store import open_client
    from orchestrator.retrieval import open_collection

    configured = settings(token_check, TOKEN)
    collection = open_collection(configured)  # the orchestrator's: get or create
    collection.upsert(ids=["a"], embeddings=[[0.1, 0.2, 0.3]], documents=["VPN reset"])
    client = open_client(configured)  # the indexer's
    assert configured.chroma_collection in [c.name for c in client.list_collections()]
    found = client.get_collection(configured.chroma_collection).get(ids=["a"])
    assert found["documents"] == ["VPN reset"]


@pytest.mark.parametrize("token", [None, "0" * 32], ids=["no-token", "wrong-token"])
def test_the_token_check_refuses_a_client_without_the_token(
    token_check: int, token: str | None
) -> None:
    from indexer.store import open_client
    from orchestrator.retrieval import open_collection

    configured = settings(token_check, token)
    with pytest.raises(Exception, match=r"401|403|Unauthorized|Forbidden|[Aa]uth"):
        open_collection(configured)
    with pytest.raises(Exception, match=r"401|403|Unauthorized|Forbidden|[Aa]uth"):
        open_client(configured).list_collections()


def test_the_heartbeat_stays_open_and_everything_else_is_closed(token_check: int) -> None:
    base = f"http://127.0.0.1:{token_check}"
    assert httpx.get(f"{base}/api/v2/heartbeat", timeout=5).status_code == 200
    listing = "/api/v2/tenants/default_tenant/databases/default_database/collections"
    assert httpx.get(base + listing, timeout=5).status_code == 401
    wrong = {"X-Chroma-Token": "0" * 32}
    assert httpx.get(base + listing, headers=wrong, timeout=5).status_code == 403
    empty = {"X-Chroma-Token": ""}
    assert httpx.get(base + listing, headers=empty, timeout=5).status_code == 401
    right = {"X-Chroma-Token": TOKEN}
    assert httpx.get(base + listing, headers=right, timeout=5).status_code == 200
    # A token sent as a bearer token is not the header the check reads.
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(base + listing, headers=bearer, timeout=5).status_code == 401
    # Paths are not a way around it.
    assert httpx.get(f"{base}/api/v2/heartbeat/../version", timeout=5).status_code in {401, 404}
    assert httpx.get(f"{base}/api/v2/version", timeout=5).status_code == 401
