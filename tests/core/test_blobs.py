"""Both blob stores pass the same tests; S3 runs against moto's server on loopback."""
import os

import pytest

from gateway.blobs import BlobError, BlobNotFound, LocalBlobStore, S3BlobStore, S3_PART



@pytest.fixture(params=["local", "s3"])
async def store(request, tmp_path):
    if request.param == "local":
        instance = LocalBlobStore(tmp_path / "blobs")
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        instance = await S3BlobStore.connect(endpoint, f"bucket-{os.urandom(4).hex()}", "test", "test")
    yield instance
    await instance.close()


async def stream(data: bytes, size: int = 1000):
    for start in range(0, len(data), size):
        yield data[start:start + size]


async def test_put_read_size_delete(store):
    data = os.urandom(300_000)
    assert await store.put("files/a", stream(data), "application/octet-stream") == len(data)
    assert await store.size("files/a") == len(data)
    assert await store.read_all("files/a") == data
    await store.delete("files/a")
    assert await store.size("files/a") is None
    await store.delete("files/a")  # deleting what is gone is fine


async def test_byte_ranges(store):
    data = bytes(range(256)) * 40
    await store.put("files/r", data)
    assert b"".join([c async for c in store.read("files/r", 10, 20)]) == data[10:20]
    assert b"".join([c async for c in store.read("files/r", 10_000)]) == data[10_000:]


async def test_missing_blob(store):
    with pytest.raises(BlobNotFound):
        await store.read_all("files/never")
    assert not await store.exists("files/never")


async def test_replacing_a_blob(store):
    await store.put("files/x", b"first version")
    await store.put("files/x", b"second")
    assert await store.read_all("files/x") == b"second"


async def test_hostile_keys_are_refused(store):
    for key in ["../etc/passwd", "/abs", "a/../../b", "", "a//b"]:
        with pytest.raises(BlobError):
            await store.put(key, b"x")


async def test_large_s3_upload_goes_in_parts(s3_endpoint):
    store = await S3BlobStore.connect(s3_endpoint, "multipart", "test", "test")
    try:
        data = os.urandom(S3_PART * 2 + 12345)
        assert await store.put("files/big", stream(data, 1 << 20)) == len(data)
        assert await store.size("files/big") == len(data)
        assert await store.read_all("files/big") == data
    finally:
        await store.close()


async def test_local_store_leaves_no_partial_file_when_the_stream_fails(tmp_path):
    store = LocalBlobStore(tmp_path / "blobs")

    async def failing():
        yield b"some bytes"
        raise ConnectionResetError("client went away")

    with pytest.raises(ConnectionResetError):
        await store.put("files/partial", failing())
    assert list((tmp_path / "blobs").rglob("*")) == [tmp_path / "blobs" / "files"]


async def test_an_s3_outage_is_a_blob_error_and_a_502(aiohttp_client, make_config):
    from aiohttp import web
    from moto.server import ThreadedMotoServer

    from gateway.app import create_app
    from gateway.context import get_context
    from gateway.plugins import Plugin
    from tests.support.servers import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    store = await S3BlobStore.connect(f"http://127.0.0.1:{port}", "outage", "test", "test")
    await store.put("files/kept", b"x")
    server.stop()
    try:
        for operation in (store.size("files/kept"), store.put("files/new", b"y"), store.delete("files/kept"),
                          store.read_all("files/kept")):
            with pytest.raises(BlobError, match="S3 .* failed"):
                await operation
    finally:
        await store.close()

    class Storing(Plugin):
        name = "storing"

        def setup(self, registrar):
            table = web.RouteTableDef()

            @table.get("/api/v1/stored/{key}")
            async def stored(request):
                blobs = get_context(request).blobs
                if request.match_info["key"] == "down":
                    raise BlobError("S3 read of 'files/x' failed: connection refused")
                return web.Response(body=await blobs.read_all(f"files/{request.match_info['key']}"))

            registrar.routes(table)

    Storing.uses = ("blobs",)
    client = await aiohttp_client(create_app("svc", make_config(), plugins=[Storing()]))
    response = await client.get("/api/v1/stored/down")
    assert response.status == 502 and (await response.json())["errorType"] == "storage_unavailable"
    response = await client.get("/api/v1/stored/never-stored")
    assert response.status == 404 and (await response.json())["errorType"] == "file_missing"
