"""Round 138 a: round 137's "a `unix://` socket path holding `@` is accepted"
(stores/redis.py `_redis_url`: `"@" in path and (scheme != "unix" or netloc)`).

README Configuration, `store`: "`RedisStore(url)` (...; a `redis://`, `rediss://` or
`unix://` URL redis-py reads, a password's `/`, `@` or `:` percent-encoded, else refused;
...)". CHANGELOG round 137: "a `unix://` socket path holding `@` is accepted".

Attack: the same socket as round 137 a's (`/run/redis@6380/redis.sock`, a systemd template
instance's directory), now with the password a production socket needs in the URL's
userinfo (`unix://:s3cretPW@/run/...`, or `unix://default:s3cretPW@/...`), the password
holding none of the characters the README asks to encode. redis-py reads it
(`parse_url` gives path, password, db).

What happened: `ValueError: ... its credentials hold an unencoded '/'`: any userinfo makes
the '@' in the socket path read as a password's '/', so the only way to give a unix socket
a password in its userinfo is refused, with a message blaming a '/' the password does not
hold. Should: accepted (redis-py's reading is the rule: the netloc ends at the first '/',
so an '@' after it in a unix URL is the path's).
"""
from __future__ import annotations

import pytest
from redis.asyncio.connection import parse_url

from agentscope_harness import RedisStore


@pytest.mark.parametrize("url", [
    "unix://:s3cretPW@/run/redis@6380/redis.sock?db=1",
    "unix://default:s3cretPW@/run/redis@6380/redis.sock?db=1",
])
def test_a_unix_socket_with_credentials_and_an_at_in_its_path_is_refused(url: str) -> None:
    read = parse_url(url)
    assert read["path"] == "/run/redis@6380/redis.sock" and read["password"] == "s3cretPW"  # redis-py reads it
    assert RedisStore("unix://:s3cretPW@/run/redis/redis.sock?db=1")  # the control: no '@' in the path
    store = RedisStore(url)
    assert store.url == url
    assert "s3cretPW" not in store._what
