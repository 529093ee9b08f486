"""The guarded fetcher against real loopback servers: what it refuses (schemes, link-local and
metadata addresses given literally, through DNS or through a redirect; private ranges unless
allowed), what it lets through, and its time, size and redirect bounds."""
from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web
from aiohttp.abc import AbstractResolver

from gateway.fetch import FetchError, FetchRefused, FetchTimeout, FetchTooLarge, GuardedFetcher
from gateway.fetch_policy import FetchPolicy


class StaticResolver(AbstractResolver):
    """Host names resolved from a table, as a hostile or misconfigured DNS server could answer."""

    def __init__(self, table: dict[str, list[str]]):
        self.table = table
        self.asked: list[str] = []

    async def resolve(self, host, port=0, family=socket.AF_INET):
        self.asked.append(host)
        if host not in self.table:
            raise OSError(f"unknown host {host}")
        return [{"hostname": host, "host": address, "port": port,
                 "family": socket.AF_INET6 if ":" in address else socket.AF_INET,
                 "proto": 0, "flags": socket.AI_NUMERICHOST} for address in self.table[host]]

    async def close(self):
        pass


RESOLVER_TABLE = {
    "metadata.test": ["169.254.169.254"],
    "provider.test": ["127.0.0.1"],
    "mixed.test": ["93.184.216.34", "169.254.169.254"],
    "private.test": ["10.1.2.3"],
}


@pytest.fixture
async def origin(aiohttp_server):
    """A loopback server with the answers the tests need."""
    seen: list[dict] = []
    app = web.Application()

    async def models(request):
        seen.append({"path": request.path, "authorization": request.headers.get("Authorization")})
        return web.json_response({"data": [{"id": "m1"}]})

    async def redirect(request):
        # The raw header, as a hostile server would send it (HTTPFound would validate the URL).
        return web.Response(status=302, headers={"Location": request.query["to"]})

    async def loop(request):
        raise web.HTTPFound("/loop")

    async def large(request):
        return web.Response(body=b"x" * 5000)

    async def streamed(request):
        response = web.StreamResponse()  # chunked: no Content-Length to refuse it early
        await response.prepare(request)
        for _ in range(10):
            await response.write(b"y" * 1000)
        await response.write_eof()
        return response

    async def slow(request):
        await asyncio.sleep(2)
        return web.Response(text="late")

    app.router.add_get("/v1/models", models)
    app.router.add_get("/redirect", redirect)
    app.router.add_get("/loop", loop)
    app.router.add_get("/large", large)
    app.router.add_get("/streamed", streamed)
    app.router.add_get("/slow", slow)
    server = await aiohttp_server(app)
    server.seen = seen
    server.base = f"http://127.0.0.1:{server.port}"
    return server


def fetcher(allow_private=False, allow_hosts=(), **options) -> GuardedFetcher:
    return GuardedFetcher(FetchPolicy.build(allow_private, allow_hosts),
                          resolver=StaticResolver(RESOLVER_TABLE), **options)


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/latest/meta-data/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[fe80::1]/",
    "http://[fd00:ec2::254]/",
    "http://100.100.100.200/",
    "http://0.0.0.0/",
    "http://224.0.0.1/",
    "http://metadata.test/latest/meta-data/",
    "http://mixed.test/",
])
async def test_metadata_and_link_local_are_refused_even_when_private_is_allowed(url):
    with pytest.raises(FetchRefused) as refused:
        await fetcher(allow_private=True, allow_hosts=["metadata.test", "169.254.0.0/16"]).fetch(url)
    assert "never fetched" in str(refused.value) or "not a unicast" in str(refused.value)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "gopher://x/", "/relative",
                                 "http://user:secret@127.0.0.1/", "http:///nohost", "http://127.0.0.1:notaport/",
                                 "http://[::1/"])
async def test_only_plain_http_urls_are_fetched(url):
    with pytest.raises(FetchRefused):
        await fetcher(allow_private=True).fetch(url)


async def test_loopback_and_private_are_refused_by_default(origin):
    for url in (f"{origin.base}/v1/models", f"http://provider.test:{origin.port}/v1/models",
                "http://private.test/", "http://10.0.0.1/", "http://[::1]/"):
        with pytest.raises(FetchRefused) as refused:
            await fetcher().fetch(url)
        assert "allow_private" in str(refused.value)
    assert origin.seen == []


async def test_loopback_is_fetched_when_the_operator_allows_it(origin):
    result = await fetcher(allow_private=True).fetch(f"{origin.base}/v1/models")
    assert result.ok and result.json() == {"data": [{"id": "m1"}]}
    by_name = await fetcher(allow_hosts=["provider.test"]).fetch(f"http://provider.test:{origin.port}/v1/models")
    assert by_name.status == 200
    by_network = await fetcher(allow_hosts=["127.0.0.0/8"]).fetch(f"{origin.base}/v1/models")
    assert by_network.status == 200
    with pytest.raises(FetchRefused):  # another private network is still closed
        await fetcher(allow_hosts=["127.0.0.0/8"]).fetch("http://private.test/")


async def test_a_redirect_to_metadata_is_refused(origin):
    for target in ("http://169.254.169.254/latest/meta-data/", "http://metadata.test/latest/meta-data/",
                   "file:///etc/passwd", "http://a:not-a-port/", "http://[::1/"):
        with pytest.raises(FetchRefused):
            await fetcher(allow_private=True).fetch(f"{origin.base}/redirect?to={target}")


async def test_a_redirect_from_public_to_private_is_checked_again(origin):
    """Allowed by name for the first hop, the redirect's own host must pass on its own."""
    policy_fetcher = fetcher(allow_hosts=["provider.test"])
    with pytest.raises(FetchRefused):
        await policy_fetcher.fetch(f"http://provider.test:{origin.port}/redirect?to=http://private.test/")


async def test_redirects_are_followed_and_credentials_stay_on_their_origin(origin):
    allowed = fetcher(allow_private=True)
    same = await allowed.fetch(f"{origin.base}/redirect?to=/v1/models", headers={"Authorization": "Bearer k"})
    assert same.status == 200 and same.redirects == [f"{origin.base}/v1/models"]
    other = f"http://provider.test:{origin.port}/v1/models"
    await allowed.fetch(f"{origin.base}/redirect?to={other}", headers={"Authorization": "Bearer k"})
    assert [hit["authorization"] for hit in origin.seen] == ["Bearer k", None]
    with pytest.raises(FetchError, match="redirects"):
        await allowed.fetch(f"{origin.base}/loop")


CALLER_HEADERS = {"Authorization": "Bearer k", "Cookie": "session=s", "Proxy-Authorization": "Basic p",
                  "X-Api-Key": "key", "X-Signature": "sha256=abc", "Accept": "application/json",
                  "Accept-Language": "en", "User-Agent": "assistant-test"}


@pytest.fixture
async def recorder(aiohttp_server):
    """A second loopback server, on another port (another origin), that records the headers it got."""
    got: list[dict[str, str]] = []

    async def record(request):
        got.append(dict(request.headers))
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/record", record)
    server = await aiohttp_server(app)
    server.got = got
    server.url = f"http://127.0.0.1:{server.port}/record"
    return server


async def test_a_redirect_to_another_origin_carries_no_credential_of_the_caller(origin, recorder):
    """Only `Authorization` was dropped: an `X-Api-Key`, a cookie or a signature followed the
    redirect to whatever origin the first server named."""
    await fetcher(allow_private=True).fetch(f"{origin.base}/redirect?to={recorder.url}", headers=CALLER_HEADERS)
    got = {name.lower(): value for name, value in recorder.got[-1].items()}
    for name in ("Authorization", "Cookie", "Proxy-Authorization", "X-Api-Key", "X-Signature"):
        assert name.lower() not in got, name
    assert got["accept"] == "application/json" and got["accept-language"] == "en"
    assert got["user-agent"] == "assistant-test"


async def test_a_request_to_its_own_origin_keeps_the_callers_headers(recorder):
    """The same headers, sent to the recorder directly, all arrive: the test above is no accident."""
    await fetcher(allow_private=True).fetch(recorder.url, headers=CALLER_HEADERS)
    got = {name.lower(): value for name, value in recorder.got[-1].items()}
    assert {name.lower(): value for name, value in CALLER_HEADERS.items()}.items() <= got.items()


async def test_size_and_time_are_bounded(origin):
    allowed = fetcher(allow_private=True, max_bytes=4096, timeout=0.5)
    with pytest.raises(FetchTooLarge):
        await allowed.fetch(f"{origin.base}/large")
    with pytest.raises(FetchTooLarge):
        await allowed.fetch(f"{origin.base}/streamed")
    assert len((await allowed.fetch(f"{origin.base}/large", max_bytes=5000)).body) == 5000
    with pytest.raises(FetchTimeout):
        await allowed.fetch(f"{origin.base}/slow")


async def test_unreachable_and_unresolvable_hosts_fail_cleanly():
    from tests.support.servers import free_port

    with pytest.raises(FetchError) as failed:
        await fetcher(allow_private=True).fetch(f"http://127.0.0.1:{free_port()}/")
    assert not isinstance(failed.value, FetchRefused)
    with pytest.raises(FetchError, match="cannot resolve"):
        await fetcher(allow_private=True).fetch("http://nowhere.test/")


def test_policy_from_configuration(make_config):
    config = make_config({"fetch.allow_private": False, "fetch.allow_hosts": ["llm.lan", "192.168.1.0/24"]})
    policy = FetchPolicy.from_config(config)
    assert policy.allow_hosts == frozenset({"llm.lan"})
    assert GuardedFetcher.from_config(make_config({"fetch.timeout": 3})).timeout == 3
    import ipaddress
    assert policy.refusal("x", ipaddress.ip_address("192.168.1.9")) is None
    assert policy.refusal("x", ipaddress.ip_address("192.168.2.9"))
    assert policy.refusal("llm.lan", ipaddress.ip_address("10.0.0.1")) is None
    assert policy.refusal("x", ipaddress.ip_address("8.8.8.8")) is None
    with pytest.raises(ValueError):
        FetchPolicy.build(False, ["bad/host"])


async def test_an_endpoint_entry_allows_one_port_only(origin):
    from tests.support.servers import free_port

    exact = fetcher(allow_hosts=[f"127.0.0.1:{origin.port}", f"provider.test:{origin.port}"])
    assert (await exact.fetch(f"{origin.base}/v1/models")).status == 200
    assert (await exact.fetch(f"http://provider.test:{origin.port}/v1/models")).status == 200
    with pytest.raises(FetchRefused) as refused:
        await exact.fetch(f"http://127.0.0.1:{free_port()}/")
    assert "allow_hosts" in str(refused.value)
    with pytest.raises(FetchRefused):  # the redirect's new port is checked again
        await exact.fetch(f"{origin.base}/redirect?to=http://127.0.0.1:{free_port()}/")
    policy = FetchPolicy.build(False, ["[::1]:8000", "LLM.lan:11434", "10.0.0.0/8", "llm.lan"])
    assert policy.allow_endpoints == frozenset({("::1", 8000), ("llm.lan", 11434)})
    for bad in ("a:b:80", "host:0", "host:99999", "llm.lan:port", "bad/host"):
        with pytest.raises(ValueError):
            FetchPolicy.build(False, [bad])


def test_a_purposes_hosts_are_allowed_for_that_purpose_only(make_config):
    import ipaddress

    from gateway.fetch_policy import endpoint_entry

    loopback = ipaddress.ip_address("127.0.0.1")
    config = make_config({"fetch.allow_hosts": [], "fetch.model_hosts": ["127.0.0.1:11434"]})
    general = FetchPolicy.from_config(config)
    assert general.refusal("127.0.0.1", loopback, 11434)
    models = FetchPolicy.from_config(config, purpose="model", also_allow=["localhost:8000"])
    assert models.refusal("127.0.0.1", loopback, 11434) is None
    assert models.refusal("localhost", loopback, 8000) is None
    assert "[fetch] model_hosts" in models.refusal("127.0.0.1", loopback, 5432)
    assert models.refusal("localhost", ipaddress.ip_address("169.254.169.254"), 8000)  # never
    assert endpoint_entry("http://[::1]/v1") == "[::1]:80"
    assert endpoint_entry("https://LLM.lan/v1") == "llm.lan:443"
    assert endpoint_entry("ftp://x/") is None


async def test_a_guarded_session_checks_every_connection_and_hop(origin):
    """What the model providers' streaming calls use: the same policy as `fetch`, at connect time."""
    import aiohttp

    from gateway.fetch import guarded_session, refusal_of
    from tests.support.servers import free_port

    policy = FetchPolicy.build(False, [f"127.0.0.1:{origin.port}", f"provider.test:{origin.port}"])
    async with guarded_session(policy, resolver=StaticResolver(RESOLVER_TABLE)) as session:
        async with session.get(f"http://provider.test:{origin.port}/v1/models") as response:
            assert response.status == 200
        for url in (f"http://127.0.0.1:{free_port()}/", "http://metadata.test/", "http://private.test/",
                    f"{origin.base}/redirect?to=http://127.0.0.1:{free_port()}/",
                    f"{origin.base}/redirect?to=http://metadata.test/"):
            with pytest.raises((FetchRefused, aiohttp.ClientError)) as refused:
                async with session.get(url):
                    pass
            assert isinstance(refusal_of(refused.value), FetchRefused), url
    assert [hit["path"] for hit in origin.seen] == ["/v1/models"]
