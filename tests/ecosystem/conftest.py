"""Fixtures of the ecosystem tests: a real redis-server when one can be had."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time

import pytest

REDIS_PORT = 6399


def _ping(url: str) -> bool:
    try:
        import redis
    except ImportError:
        return False
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5, socket_timeout=0.5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:
        return False


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="session")
def redis_url():
    """``HARNESS_TEST_REDIS_URL`` (``.ci/run`` starts redis-server on port
    6399 and exports it) or a server already on port 6399; otherwise a
    redis-server this fixture starts and stops itself. Skips, saying why,
    only when none can be had."""
    try:
        import redis  # noqa: F401
    except ImportError:
        pytest.skip("RedisStore tests need the redis package: pip install 'agentscope-harness[redis]'")
    candidates = [os.environ.get("HARNESS_TEST_REDIS_URL"), f"redis://127.0.0.1:{REDIS_PORT}/0"]
    for url in filter(None, candidates):
        if _ping(url):
            yield url
            return
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("no redis-server binary (apt-get install redis-server, or set "
                    "HARNESS_TEST_REDIS_URL): RedisStore tests skipped")
    port = REDIS_PORT
    if not _port_free(port):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
    url = f"redis://127.0.0.1:{port}/0"
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 5
        while not _ping(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip(f"redis-server could not be started on port {port}: RedisStore tests skipped")
            time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
