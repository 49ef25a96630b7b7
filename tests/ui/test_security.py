"""The inbox's gate on its own: host names, origins, signed cookies, CSRF tokens, forms."""

from __future__ import annotations

import pytest

from miniagent.ui.security import (
    MAX_FORM_BYTES,
    Gate,
    LoginThrottle,
    Refused,
    cookie_of,
    parse_form,
    set_cookie,
)

TOKEN = "0123456789abcdef-token"


@pytest.mark.parametrize("host", ["127.0.0.1:8321", "localhost", "LOCALHOST:1", "[::1]:8321"])
def test_loopback_names_pass(host: str) -> None:
    Gate().check_host(host)


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.evil.example:80", "[::2]:1",
                                  "0.0.0.0:8321", ""])
def test_other_names_are_refused(host: str) -> None:
    with pytest.raises(Refused) as refused:
        Gate().check_host(host)
    assert refused.value.status == 421


def test_any_name_passes_behind_a_token() -> None:
    Gate(token=TOKEN, allowed_hosts=["*"]).check_host("inbox.internal:8321")


@pytest.mark.parametrize(("origin", "referer", "ok"), [
    ("http://127.0.0.1:8321", None, True),
    ("http://127.0.0.1:8321", "http://evil.example/", True),  # the Origin decides
    ("https://127.0.0.1:8321", None, False),  # another scheme
    ("http://127.0.0.1:8322", None, False),
    ("null", "http://127.0.0.1:8321/sessions", True),
    ("null", None, False),
    (None, "http://127.0.0.1:8321/", True),
    (None, "http://127.0.0.1:8321.evil.example/", False),
    (None, None, False),
])
def test_only_this_servers_pages_may_post(origin: str | None, referer: str | None,
                                          ok: bool) -> None:
    def check() -> None:
        Gate.check_origin("http", "127.0.0.1:8321", origin, referer)

    if ok:
        check()
    else:
        with pytest.raises(Refused):
            check()


def test_cookies_are_signed_and_a_token_needs_a_logged_in_one() -> None:
    open_gate, guarded = Gate(), Gate(token=TOKEN)
    anonymous = open_gate.new_cookie(logged_in=False)
    assert open_gate.cookie_valid(anonymous)
    assert not Gate().cookie_valid(anonymous)  # another key: another server, or a restart
    assert not guarded.cookie_valid(guarded.new_cookie(logged_in=False))
    assert guarded.cookie_valid(guarded.new_cookie(logged_in=True))
    nonce, mac = anonymous.split(".")
    for forged in (f"{nonce}.{'0' * len(mac)}", f"{'1' * len(nonce)}.{mac}", nonce, "", "a.b.c"):
        assert not open_gate.cookie_valid(forged)


def test_the_csrf_token_is_the_cookies_own() -> None:
    gate = Gate()
    one, two = gate.new_cookie(logged_in=False), gate.new_cookie(logged_in=False)
    gate.check_csrf(one, gate.csrf(one))
    for cookie, given in ((one, gate.csrf(two)), (one, ""), (None, gate.csrf(one)),
                          (one, None)):
        with pytest.raises(Refused):
            gate.check_csrf(cookie, given)


def test_the_token_is_checked_whole() -> None:
    gate = Gate(token=TOKEN)
    assert gate.login(TOKEN)
    assert not gate.login(TOKEN[:-1]) and not gate.login(TOKEN + "x") and not gate.login("")
    with pytest.raises(ValueError):
        Gate(token="short")


def test_forms_are_bounded() -> None:
    assert parse_form(b"a=1&b=%E4%BD%A0&a=2") == {"a": "1", "b": "你"}
    with pytest.raises(Refused) as large:
        parse_form(b"a=" + b"x" * MAX_FORM_BYTES)
    assert large.value.status == 413
    with pytest.raises(Refused):
        parse_form(b"&".join(b"f%d=1" % n for n in range(100)))  # too many fields
    with pytest.raises(Refused):
        parse_form(b"a=\xff")


def test_cookie_headers() -> None:
    assert cookie_of("x=1; miniagent_ui=abc.def; y=2") == "abc.def"
    assert cookie_of('bad"cookie; =') is None and cookie_of(None) is None
    assert set_cookie("v", secure=True).endswith("HttpOnly; SameSite=Strict; Secure")


def test_failed_logins_are_throttled() -> None:
    throttle = LoginThrottle(per_minute=3)
    for _ in range(3):
        assert throttle.allowed()
        throttle.failed()
    assert not throttle.allowed()


def test_one_address_failing_does_not_lock_out_another() -> None:
    throttle = LoginThrottle(per_minute=3)
    for _ in range(50):  # a stranger guessing from another machine
        throttle.failed("203.0.113.7")
    assert not throttle.allowed("203.0.113.7")
    assert throttle.allowed("192.0.2.10")  # the owner still logs in


def test_the_throttle_remembers_a_bounded_number_of_addresses() -> None:
    throttle = LoginThrottle(per_minute=1, max_addresses=10)
    for n in range(1000):
        throttle.failed(f"10.0.{n // 256}.{n % 256}")
    assert len(throttle._failures) == 10


@pytest.mark.parametrize(("client", "local"), [
    (("127.0.0.1", 5000), True), (("127.8.9.1", 1), True), (("::1", 1), True),
    (None, True),  # a Unix socket: its file permissions chose who connects
    (("203.0.113.7", 5000), False), (("10.0.0.2", 1), False), (("testclient", 1), False),
    (("0.0.0.0", 1), False)])
def test_without_a_token_only_peers_on_this_machine_pass(client: tuple[str, int] | None,
                                                         local: bool) -> None:
    if local:
        Gate().check_peer(client)
    else:
        with pytest.raises(Refused) as refused:
            Gate().check_peer(client)
        assert refused.value.status == 403
    Gate(token=TOKEN).check_peer(client)  # behind a token, any peer may try to log in


def test_a_login_link_works_once_and_not_after_it_expires() -> None:
    gate = Gate(token=TOKEN)
    code = gate.new_link(now=100.0)
    assert not gate.redeem(code + "x", now=101.0)
    assert gate.redeem(code, now=101.0)
    assert not gate.redeem(code, now=102.0)  # used
    late = gate.new_link(now=100.0)
    assert not gate.redeem(late, now=100.0 + 16 * 60)  # expired
    with pytest.raises(ValueError):
        Gate().new_link()  # no token: nothing to log in to
