"""memnets.httpguard's decisions, as pure functions: which Host and Origin values name the server for
a bind host, and which Authorization values carry the token. The real server processes that use
them are driven in tests/integrations/test_security_mcp.py."""

from __future__ import annotations

import asyncio
import builtins

import pytest

from memnets.httpguard import HTTPGuard, allowed_origins, check_bind, host_names, host_of, is_control_flow


@pytest.mark.parametrize(
    ("authority", "host"),
    [
        ("127.0.0.2:8000", "127.0.0.2"),
        ("[0:0:0:0:0:0:0:1]:80", "::1"),
        ("[::0:1]", "::1"),
        ("LocalHost.:8000", "localhost"),
        ("Evil.Example", "evil.example"),
        ("evil.example:", "evil.example"),
        ("[::1", None),
        ("a b", None),
        ("host:port", None),
        ("127.0.0.1:١٢", None),  # non-ASCII digits are no port
        ("user@127.0.0.1", None),
        ("", None),
    ],
)
def test_host_of_normalises_or_refuses(authority, host):
    assert host_of(authority) == host


LOOPBACK_NAMES = ["127.0.0.1:1", "127.9.9.9", "[::1]:8000", "[::ffff:127.0.0.1]", "localhost:8000", "localhost."]
FOREIGN = ["evil.example", "localhost.evil.example", "127.0.0.1.evil.example", "[::1].evil", "10.0.0.5", "[fe80::1]"]


@pytest.mark.parametrize("bind", ["127.0.0.1", "127.0.0.2", "::1", "0:0:0:0:0:0:0:1", "::0:1", "localhost"])
def test_a_loopback_bind_accepts_loopback_names_only(bind):
    guard = HTTPGuard(None, host=bind)
    for authority in LOOPBACK_NAMES:
        assert guard.allows(host_of(authority)), (bind, authority)
    for authority in FOREIGN:
        assert not guard.allows(host_of(authority)), (bind, authority)


def test_wildcard_specific_and_named_binds():
    wildcard = HTTPGuard(None, host="0.0.0.0", token="t", allowed_hosts=["memory.example.org"])
    assert all(wildcard.allows(host_of(a)) for a in ["10.0.0.5", "[fe80::1]", "localhost", "Memory.Example.Org:443"])
    assert not wildcard.allows(host_of("evil.example"))
    specific = HTTPGuard(None, host="10.0.0.5", token="t")
    assert specific.allows(host_of("10.0.0.5:8000"))
    assert not any(specific.allows(host_of(a)) for a in ["10.0.0.6", "localhost", "127.0.0.1", "evil.example"])
    named = HTTPGuard(None, host="Memory.Example.Org", token="t")
    assert named.allows(host_of("memory.example.org.:8000"))
    assert not named.allows(host_of("127.0.0.1"))
    with pytest.raises(ValueError, match="allowed host 'a b' is not an address"):
        host_names("127.0.0.1", ["a b"])
    with pytest.raises(ValueError, match="host 'x/y' is not"):
        HTTPGuard(None, host="x/y")


def headers(**values: str) -> list[tuple[bytes, bytes]]:
    return [(name.replace("_", "-").encode(), value.encode("latin-1")) for name, value in values.items()]


def test_refusals_name_the_header_and_the_status():
    guard = HTTPGuard(None, host="127.0.0.2", token="tok")
    ok = {"host": "127.0.0.2:9", "authorization": "Bearer tok"}
    assert guard.refusal(headers(**ok)) is None
    assert guard.refusal(headers(**(ok | {"authorization": "bEaReR   tok"}))) is None
    assert guard.refusal(headers(**(ok | {"host": "evil.example"})))[0] == 421
    assert guard.refusal(headers(authorization="Bearer tok"))[0] == 421  # no Host at all
    assert guard.refusal(headers(**ok) + headers(host="127.0.0.2"))[0] == 421  # two Host headers
    for origin in ["http://evil.example", "null", "file://", "http://127.0.0.2/path", "ftp://127.0.0.2"]:
        assert guard.refusal(headers(**ok, origin=origin))[0] == 403, origin
    assert guard.refusal(headers(**ok, origin="http://localhost:3000")) is None
    for authorization in ["tok", "Bearer", "Bearer tok2", "Basic tok", "Bearertok", "Bearer  to k"]:
        assert guard.refusal(headers(**(ok | {"authorization": authorization}))) == (
            401,
            "unauthorized: send Authorization: Bearer <token>",
        ), authorization
    assert guard.refusal(headers(**ok) + headers(authorization="Bearer tok"))[0] == 401  # two credentials


def test_cors_origins_pass_the_origin_check_as_browsers_write_them_and_never_the_host_check():
    assert allowed_origins(["HTTP://App.Example:80/", "https://[0:0::1]:8443", "https://b.example:443"]) == [
        "http://app.example",
        "https://[::1]:8443",
        "https://b.example",
    ]
    for bad in ["*", "app.example", "http://app.example/path", "ftp://app.example", "null", "http://a:99999"]:
        with pytest.raises(ValueError, match="cors origin .* is not one origin"):
            allowed_origins([bad])
    guard = HTTPGuard(None, host="127.0.0.1", cors_origins=["https://App.Example"])
    ok = {"host": "127.0.0.1:8000"}
    for origin in ["https://app.example", "https://app.example:443", "http://localhost:5173"]:
        assert guard.refusal(headers(**ok, origin=origin)) is None, origin
    for origin in ["http://app.example", "https://app.example:8443", "https://evil.example", "null"]:
        assert guard.refusal(headers(**ok, origin=origin))[0] == 403, origin
    assert guard.refusal(headers(host="app.example"))[0] == 421


def test_check_bind_wants_a_token_off_loopback():
    check_bind("127.0.0.2", None)
    check_bind("0.0.0.0", "a token")
    with pytest.raises(ValueError, match="reachable from other machines"):
        check_bind("0.0.0.0", None)


def a_tokenizer_panic() -> BaseException:
    """A real pyo3 PanicException: a tokenizer regex that hits Oniguruma's retry limit."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"(a|aa)+b"), behavior="isolated")
    try:
        tokenizer.encode("a" * 100)
    except BaseException as error:
        return error
    raise AssertionError("the tokenizer did not panic")


def test_control_flow_is_cancellation_and_exits_only():
    panic = a_tokenizer_panic()
    assert not isinstance(panic, Exception) and "retry-limit-in-match" in str(panic)
    assert not is_control_flow(panic) and not is_control_flow(ValueError())
    assert is_control_flow(asyncio.CancelledError()) and is_control_flow(KeyboardInterrupt())
    assert is_control_flow(SystemExit(0)) and is_control_flow(GeneratorExit())
    groups = getattr(builtins, "BaseExceptionGroup", None)  # Python 3.11+
    if groups is not None:
        assert is_control_flow(groups("g", [ValueError(), asyncio.CancelledError()]))
        assert not is_control_flow(groups("g", [panic]))
