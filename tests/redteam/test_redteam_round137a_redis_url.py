"""Round 137 a: round 136 a's Redis URL check (stores/redis.py ``_redis_url``,
``_without_credentials``).

README Configuration, ``store``: "``RedisStore(url)`` (extra ``[redis]``; a ``redis://``,
``rediss://`` or ``unix://`` URL redis-py reads, a password's ``/``, ``@`` or ``:``
percent-encoded, else refused; told as ``redis://***@host:port/db`` wherever it is told:
the model, a report, a log)". CHANGELOG round 136 a: such URLs are "refused at construction
(redis-py's own parser run there), and a store is told as ``scheme://***@address``";
``_redis_url``'s docstring: refused "and never quoted (a password in it would be)".
"""
from __future__ import annotations

import pytest
from redis.asyncio.connection import parse_url

from agentscope_harness import RedisStore

SECRET_HEAD = "Tr0ub4dor"


@pytest.mark.parametrize("url", [
    f"redis://admin:{SECRET_HEAD}#3xq@127.0.0.1:6399/5",   # a generated password holding '#'
    f"redis://admin:{SECRET_HEAD}?3xq@127.0.0.1:6399/5",   # ... or '?'
    f"rediss://admin:{SECRET_HEAD}#3xq@cache.example:6380/0",
    f"reddis://admin:{SECRET_HEAD}#3xq@127.0.0.1:6399/5",  # a scheme typo: its error printed by CI
])
def test_a_password_holding_hash_or_question_mark_is_quoted_by_the_refusal(url: str) -> None:
    """Attack: a password with an unencoded ``#`` or ``?`` (common in generated
    passwords; the README names only ``/ @ :`` as needing encoding). ``_without_credentials``
    cuts the query and fragment *before* looking for the ``@``, so the ``@`` (past the
    ``#``/``?``) is never seen and nothing is masked.

    Happened: ``ValueError: ... 'redis://admin:Tr0ub4dor' does not read as one``: the user
    name and the password up to its ``#`` printed in the construction error (a worker's
    crash log, CI output, check-config). Should: refused without any of the password."""
    with pytest.raises(ValueError) as info:
        RedisStore(url)
    assert SECRET_HEAD not in str(info.value), str(info.value)


@pytest.mark.parametrize("url,secret", [
    ("redis://:pa[ssw0rdQ]x@127.0.0.1:6399/5", "ssw0rdQ"),
    ("redis://svc:k3y[Zr9Lm2]@127.0.0.1:6399/5", "Zr9Lm2"),
])
def test_a_password_holding_brackets_is_quoted_by_the_refusal(url: str, secret: str) -> None:
    """Attack: a password holding ``[...]`` unencoded. ``_redis_url`` calls
    ``urlsplit(url).scheme`` outside its ``try``; Python's ``urlsplit`` reads the bracketed
    part of the netloc as an IPv6 host and raises ``ValueError("'<that part>' does not
    appear to be an IPv4 or IPv6 address")``.

    Happened: ``RedisStore(url)`` raises Python's own error quoting the password's
    characters between the brackets. Should: refused with the harness's message, naming
    none of the password."""
    with pytest.raises(ValueError) as info:
        RedisStore(url)
    assert secret not in str(info.value), str(info.value)


def test_a_unix_socket_path_holding_an_at_sign_is_refused() -> None:
    """Attack (a valid URL refused): ``unix:///run/redis@6380/redis.sock?db=2``, a socket
    under a systemd template instance's directory, no credentials at all. redis-py reads
    it (``parse_url`` gives ``path='/run/redis@6380/redis.sock', db=2``).

    Happened: ``ValueError: ... its credentials hold an unencoded '/'``: the '@ past the
    first /' rule reads any '@' in a socket path as a password's '/'. Should: accepted
    (README: "a ``unix://`` URL redis-py reads")."""
    url = "unix:///run/redis@6380/redis.sock?db=2"
    assert parse_url(url)["path"] == "/run/redis@6380/redis.sock"  # redis-py reads it
    store = RedisStore(url)
    assert store.url == url
