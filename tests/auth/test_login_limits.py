"""Login limits per client address and per account (docs/auth.md, "Login limits"), with the
real gateway and the real frontend proxy on loopback ports: the frontend vouches for its
clients' addresses with the service credential, a forged vouch counts for nothing, and an
account under attack slows each address down by a bounded delay but never locks its owner out."""
from __future__ import annotations

import asyncio
import time

import pytest

from gateway.app import create_app
from gateway.forwarding import CLIENT_ADDRESS_HEADER, CLIENT_PROOF_HEADER, vouch_headers
from gateway.plugins import PluginError
from plugins.frontend import FrontendPlugin
from tests.auth.conftest import API, build_app
from tests.conftest import TEST_ADMIN_PASSWORD

SERVICE_TOKEN = "test-service-token"  # what make_config gives every service
ADMIN = {"username": "admin", "password": TEST_ADMIN_PASSWORD}
WRONG = {"username": "admin", "password": "not-the-password"}


def vouched(address: str, **kwargs) -> dict[str, str]:
    return vouch_headers(address, kwargs.pop("token", SERVICE_TOKEN), **kwargs)


async def login(client, body, headers=None):
    response = await client.post(f"{API}/auth/login", json=body, headers=headers or {})
    await response.read()
    return response


def assert_limited(response, at_most: int = 60) -> None:
    assert response.status == 429
    assert 1 <= int(response.headers["Retry-After"]) <= at_most


@pytest.fixture
async def behind_frontend(aiohttp_server, aiohttp_client, auth_config, make_config):
    """A client of the frontend (which it takes for a reverse proxy in front of it, so each
    request names its browser in X-Forwarded-For), the frontend, and the gateway as shipped:
    the default limits, no trusted proxies."""
    async def build(**gateway_settings):
        gateway = await aiohttp_server(build_app(auth_config(**gateway_settings)))
        frontend = create_app("frontend", make_config({
            "peers.gateway_url": str(gateway.make_url("")).rstrip("/"),
            "plugins.frontend": {"trusted_proxies": ["127.0.0.0/8"]}}), plugins=[FrontendPlugin()])
        return await aiohttp_client(frontend)
    return build


async def test_a_strangers_failures_through_the_frontend_do_not_lock_out_the_administrator(behind_frontend):
    web_client = await behind_frontend(rate_limit_per_minute=5)
    stranger, administrator = {"X-Forwarded-For": "203.0.113.9"}, {"X-Forwarded-For": "198.51.100.7"}
    for _ in range(5):
        assert (await login(web_client, WRONG, stranger)).status == 401
    assert_limited(await login(web_client, WRONG, stranger))
    assert_limited(await login(web_client, ADMIN, stranger))  # the stranger's address is spent, whatever it sends
    answer = await login(web_client, ADMIN, administrator)
    assert answer.status == 200 and (await answer.json())["refresh_token_cookie"] is True
    # What the browser itself sends in the vouching headers never reaches the gateway.
    forged = {**administrator, **vouched("192.0.2.1", token="guessed")}
    assert (await login(web_client, ADMIN, forged)).status == 200


async def test_a_forged_client_address_counts_for_nothing(aiohttp_client, auth_config):
    gateway = await aiohttp_client(build_app(auth_config(rate_limit_per_minute=3)))
    now = time.time()
    forgeries = [
        {CLIENT_ADDRESS_HEADER: "203.0.113.1"},                                   # no proof
        {CLIENT_ADDRESS_HEADER: "203.0.113.2", CLIENT_PROOF_HEADER: "0.abc"},    # a made-up one
        vouched("203.0.113.3", token="not-the-service-token"),                    # another credential
        {**vouched("203.0.113.4"), CLIENT_ADDRESS_HEADER: "203.0.113.5"},         # another address's proof
        vouched("203.0.113.6", now=now - 3600),                                   # an old one, replayed
    ]
    for headers in forgeries[:3]:
        assert (await login(gateway, WRONG, headers)).status == 401
    for headers in forgeries:  # each counted against the caller's own address, already spent
        assert_limited(await login(gateway, WRONG, headers))
    # Only a proof made with the service credential names another client, with its own count.
    assert (await login(gateway, ADMIN, vouched("198.51.100.7"))).status == 200


async def test_an_ipv6_client_is_counted_by_its_64(aiohttp_client, auth_config):
    gateway = await aiohttp_client(build_app(auth_config(rate_limit_per_minute=2)))
    for address in ("2001:db8:0:7::1", "2001:db8:0:7::2"):
        assert (await login(gateway, WRONG, vouched(address))).status == 401
    assert_limited(await login(gateway, ADMIN, vouched("2001:db8:0:7:ffff::3")))
    assert (await login(gateway, ADMIN, vouched("2001:db8:0:8::1"))).status == 200


async def test_many_addresses_guessing_one_account_are_slowed_by_a_bounded_delay(aiohttp_client, auth_config):
    gateway = await aiohttp_client(build_app(auth_config(account_free_failures=3, account_max_delay_seconds=60)))
    waits = []
    for number in range(1, 13):
        address = vouched(f"203.0.113.{number}")
        # Every guess from a fresh address is heard; usernames are one account regardless of case.
        guess = {**WRONG, "username": "Admin" if number % 2 else "admin"}
        assert (await login(gateway, guess, address)).status == 401
        if number > 3:  # beyond the account's free failures each guessing address must wait,
            again = await login(gateway, ADMIN, address)  # even with the right password
            assert_limited(again, at_most=60)
            waits.append(int(again.headers["Retry-After"]))
    # 1, 2, 4, ... seconds: the wait grows with the account's failures, to the bound and no further.
    assert waits[0] == 1 and waits[-1] > 32
    # The owner, at any address that has not just failed, is not held up at all.
    assert (await login(gateway, ADMIN, vouched("198.51.100.7"))).status == 200
    assert (await login(gateway, ADMIN, vouched("203.0.113.1"))).status == 200


async def test_the_owner_gets_in_after_the_delay(aiohttp_client, auth_config):
    gateway = await aiohttp_client(build_app(auth_config(account_free_failures=1, account_max_delay_seconds=1)))
    owner = vouched("198.51.100.7")
    for _ in range(3):
        assert (await login(gateway, WRONG, owner)).status in (401, 429)
    assert_limited(await login(gateway, ADMIN, owner), at_most=1)
    await asyncio.sleep(1.2)
    assert (await login(gateway, ADMIN, vouched("198.51.100.7"))).status == 200


async def test_the_account_delay_holds_across_instances_sharing_redis(aiohttp_client, auth_config, redis_url,
                                                                     bus_prefix):
    settings = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first = await aiohttp_client(build_app(auth_config(settings, account_free_failures=1)))
    second = await aiohttp_client(build_app(auth_config(settings, account_free_failures=1)))
    assert (await login(first, WRONG, vouched("203.0.113.1"))).status == 401
    assert (await login(second, WRONG, vouched("203.0.113.2"))).status == 401
    assert_limited(await login(first, WRONG, vouched("203.0.113.2")))


def test_a_bad_trusted_proxy_entry_stops_the_frontend(make_config):
    with pytest.raises(PluginError, match="plugins.frontend.trusted_proxies"):
        create_app("frontend", make_config({"plugins.frontend": {"trusted_proxies": ["nonsense"]}}),
                   plugins=[FrontendPlugin()])
