"""The register/login rate limit (per client address, through the bus, across instances,
X-Forwarded-For only from trusted proxies) and the profile during a database outage."""
from urllib.parse import urlsplit

import psycopg2
import pytest

from gateway.plugins import PluginError
from tests.auth.conftest import API, bearer, build_app
from tests.conftest import TEST_ADMIN_PASSWORD


async def attempt(client, path="login", forwarded_for=None):
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    return await client.post(f"{API}/auth/{path}", json={"username": "nobody", "password": "whatever"},
                             headers=headers)


async def assert_limited(response):
    assert response.status == 429
    body = await response.json()
    assert body["errorType"] == "rate_limited" and body["error"] and body["hint"]
    assert 1 <= int(response.headers["Retry-After"]) <= 60


@pytest.mark.parametrize("path", ["login", "register"])
async def test_five_attempts_a_minute(aiohttp_client, auth_config, path):
    client = await aiohttp_client(build_app(auth_config(rate_limit_per_minute=5)))
    for _ in range(5):
        assert (await attempt(client, path)).status in {401, 403}
    await assert_limited(await attempt(client, path))
    # Without trusted proxies, a forged X-Forwarded-For does not buy a fresh count.
    await assert_limited(await attempt(client, path, forwarded_for="203.0.113.9"))


async def test_forwarded_for_from_a_trusted_proxy(aiohttp_client, auth_config):
    client = await aiohttp_client(build_app(auth_config(rate_limit_per_minute=2,
                                                        trusted_proxies=["127.0.0.0/8", "10.0.0.0/8"])))
    for _ in range(2):
        assert (await attempt(client, forwarded_for="203.0.113.9")).status == 401
    await assert_limited(await attempt(client, forwarded_for="203.0.113.9"))
    # Another client behind the same proxy has its own count ...
    assert (await attempt(client, forwarded_for="198.51.100.7")).status == 401
    # ... and what the client itself put in front of the trusted hops is ignored.
    await assert_limited(await attempt(client, forwarded_for="1.2.3.4, 203.0.113.9, 10.0.0.5"))


async def test_the_limit_holds_across_instances_sharing_redis(aiohttp_client, auth_config, redis_url,
                                                              bus_prefix):
    settings = {"bus.redis_url": redis_url, "bus.prefix": bus_prefix}
    first = await aiohttp_client(build_app(auth_config(settings, rate_limit_per_minute=5)))
    second = await aiohttp_client(build_app(auth_config(settings, rate_limit_per_minute=5)))
    for client in (first, second, first, second, first):
        assert (await attempt(client)).status == 401
    await assert_limited(await attempt(second))
    await assert_limited(await attempt(first))


def test_a_bad_trusted_proxy_entry_stops_start_up(auth_config):
    with pytest.raises(PluginError, match="trusted_proxies"):
        build_app(auth_config(trusted_proxies=["not-an-address"]))


def test_a_short_jwt_secret_stops_start_up(auth_config):
    with pytest.raises(PluginError, match="JWT_SECRET"):
        build_app(auth_config({"auth.jwt_secret": "short"}))


async def test_profile_while_the_database_is_down(aiohttp_client, auth_config, postgres_server, database_url):
    client = await aiohttp_client(build_app(auth_config({"auth.registration_enabled": True})))
    user = await (await client.post(f"{API}/auth/register", json={
        "username": "alice", "password": "secret1", "email": "a@example.com", "nickname": "Alice",
        "verify_code": "ABC123"})).json()
    admin = await (await client.post(f"{API}/auth/login", json={
        "username": "admin", "password": TEST_ADMIN_PASSWORD})).json()

    # Take the database away under the running app: refuse new connections, end the open ones.
    name = urlsplit(database_url).path.lstrip("/")
    connection = psycopg2.connect(postgres_server.url)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                           " WHERE datname = %s AND pid <> pg_backend_pid()", (name,))
        for _ in range(3):  # every pooled connection is dead; none can be opened
            response = await client.get(f"{API}/profile", headers=bearer(user["token"]))
            assert response.status == 200
            answer = await response.json()
            # the deployment's default zone: a chosen one cannot be read now
            assert answer == {"user_id": "user_alice", "username": "alice", "nickname": "Alice", "is_admin": False,
                              "created_at": None, "timezone": answer["timezone"], "timezone_chosen": False,
                              "password_change_required": False} and answer["timezone"]
        response = await client.get(f"{API}/profile", headers=bearer(admin["token"]))
        assert response.status == 200
        assert (await response.json())["created_at"] is None
        # The administrator still logs in; other users get a clear 503, not a 500.
        assert (await client.post(f"{API}/auth/login", json={
            "username": "admin", "password": TEST_ADMIN_PASSWORD})).status == 200
        response = await client.post(f"{API}/auth/login", json={"username": "alice", "password": "secret1"})
        assert response.status == 503
        assert (await response.json())["errorType"] == "database_unavailable"
        response = await client.post(f"{API}/auth/refresh", json={"refresh_token": user["refresh_token"]})
        assert response.status == 503
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        connection.close()
    response = await client.get(f"{API}/profile", headers=bearer(user["token"]))
    assert (await response.json())["created_at"] is not None
