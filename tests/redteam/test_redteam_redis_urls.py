"""Rounds 136 and 137 (red team on round 135's Redis store): its URL is told without its
credentials wherever it is told (the model, a report, a log, an error at construction),
and only a URL redis-py can use is accepted.

Refused, naming none of the password: a password with an unencoded `/` (a base64 key
pasted as the console prints it: redis-py's own parse error quoted 16 of its
characters), `#` or `?` (the query was cut before the `@` was looked for), `[...]`
(Python's IPv6 error quoted the bracketed part), a scheme typo. Accepted: a `unix://`
socket path holding `@` (a systemd instance directory), with or without credentials.
"""
from __future__ import annotations

import pytest
from redis.asyncio.connection import parse_url

from agentscope_harness import RedisStore

BASE64_KEY = "Zk9Qm2Lx7Rt4Wv8N/c1Hs5Jd="  # as a cloud console prints it
REFUSED = {
    "slash": (f"redis://svc:{BASE64_KEY}@127.0.0.1:6399/1", ("Zk9Qm2Lx7Rt4Wv8N", "c1Hs5Jd=")),
    "slash-unix": (f"unix://:{BASE64_KEY}@/tmp/no-such.sock?db=1", ("Zk9Qm2Lx7Rt4Wv8N", "c1Hs5Jd=")),
    "hash": ("redis://admin:Tr0ub4dor#3xq@127.0.0.1:6399/1", ("Tr0ub4dor",)),
    "question-mark": ("redis://admin:Tr0ub4dor?3xq@127.0.0.1:6399/1", ("Tr0ub4dor",)),
    "hash-rediss": ("rediss://admin:Tr0ub4dor#3xq@cache.example:6380/0", ("Tr0ub4dor",)),
    "brackets": ("redis://:pa[ssw0rdQ]x@127.0.0.1:6399/1", ("ssw0rdQ",)),
    "brackets-user": ("redis://svc:k3y[Zr9Lm2]@127.0.0.1:6399/1", ("Zr9Lm2",)),
    "scheme-typo": (f"reddis://svc:{BASE64_KEY}@127.0.0.1:6399/1", ("Zk9Qm2Lx7Rt4Wv8N", "c1Hs5Jd=")),
}
ACCEPTED = {
    "unix-at-in-path": ("unix:///run/redis@6380/redis.sock?db=2", "unix:///run/redis@6380/redis.sock?db=2", None),
    "unix-credentials-at-in-path": ("unix://:s3cretPW@/run/redis@6380/redis.sock?db=1",
                                    "unix://***@/run/redis@6380/redis.sock?db=1", "s3cretPW"),
    "unix-user-credentials-at-in-path": ("unix://default:s3cretPW@/run/redis@6380/redis.sock?db=1",
                                         "unix://***@/run/redis@6380/redis.sock?db=1", "s3cretPW"),
    "encoded-password": ("redis://u:p%2Fq@h/0", "redis://***@h:6379/0", "p%2Fq"),
    "query-password": ("redis://svc:pw@127.0.0.1:6399/7?password=x", "redis://***@127.0.0.1:6399/7", "pw@"),
    "ipv6": ("redis://[::1]:6379/0", "redis://[::1]:6379/0", None),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_url_redis_cannot_use_is_refused_naming_none_of_its_password(name: str) -> None:
    url, secrets = REFUSED[name]
    with pytest.raises(ValueError, match="url must be a redis://") as info:
        RedisStore(url)
    assert not any(part in str(info.value) for part in secrets), str(info.value)


@pytest.mark.parametrize("name", list(ACCEPTED))
def test_a_url_redis_reads_is_accepted_and_told_without_credentials(name: str) -> None:
    url, told, secret = ACCEPTED[name]
    parse_url(url)  # redis-py reads it
    store = RedisStore(url)
    assert store.url == url
    assert store.told == f"Redis store {told}"
    assert secret is None or secret not in store.told
