"""Thumbnail benchmark: a 12-megapixel JPEG to a 300 px thumbnail.

1. Our path (`plugins.files.imaging.make_thumbnail`: JPEG draft decoding at a reduced scale,
   then reduce + LANCZOS) against a naive full decode and resize. Target: at least 4x faster.
2. Event-loop lag while 20 thumbnails are made concurrently through the real HTTP path
   (upload, then GET /api/v1/files/{id}/thumbnail on a gateway app with real PostgreSQL and
   local blob storage). Target: p99 lag under 10 ms.

    .venv/bin/python -m bench.thumbnails.run            # DATABASE_URL used when it answers
"""
from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

PROJECT_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT_ROOT))

from plugins.files import imaging  # noqa: E402


def twelve_megapixel_jpeg(seed: int = 0) -> bytes:
    """4000x3000 with noise and shapes, so it decodes like a photo rather than a flat fill."""
    width, height = 4000, 3000
    noise = Image.effect_noise((width // 4, height // 4), 60).resize((width, height))
    image = Image.merge("RGB", (noise, noise.transpose(Image.Transpose.FLIP_LEFT_RIGHT),
                                noise.transpose(Image.Transpose.FLIP_TOP_BOTTOM)))
    draw = ImageDraw.Draw(image)
    for index in range(40):
        x = (index * 397 + seed * 131) % width
        y = (index * 211 + seed * 71) % height
        draw.ellipse((x, y, x + 300, y + 200), fill=((index * 53) % 256, (index * 97) % 256, 120))
    image = image.filter(ImageFilter.GaussianBlur(1))
    output = io.BytesIO()
    image.save(output, "JPEG", quality=90)
    return output.getvalue()


def naive_thumbnail(data: bytes, side: int = 300) -> bytes:
    """What a first attempt does: decode every pixel, resize the full image, encode."""
    with Image.open(io.BytesIO(data)) as image:
        image = image.convert("RGB")
        scale = side / max(image.size)
        resized = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))),
                               Image.Resampling.LANCZOS)
        output = io.BytesIO()
        resized.save(output, "JPEG", quality=85, optimize=True)
        return output.getvalue()


def time_function(function, data: bytes, rounds: int) -> list[float]:
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        function(data) if function is naive_thumbnail else function(io.BytesIO(data))
        timings.append(time.perf_counter() - started)
    return timings


def single_thumbnail(rounds: int) -> None:
    data = twelve_megapixel_jpeg()
    with Image.open(io.BytesIO(imaging.make_thumbnail(io.BytesIO(data)))) as ours:
        with Image.open(io.BytesIO(naive_thumbnail(data))) as naive:
            print(f"12 MP JPEG ({len(data) / 1e6:.1f} MB) -> ours {ours.size}, naive {naive.size}")
    ours = statistics.median(time_function(imaging.make_thumbnail, data, rounds))
    naive = statistics.median(time_function(naive_thumbnail, data, rounds))
    print(f"single thumbnail, median of {rounds}: ours {ours * 1000:.1f} ms, naive {naive * 1000:.1f} ms, "
          f"ratio {naive / ours:.1f}x (target >= 4x)")


async def concurrent_lag(count: int) -> None:
    from aiohttp import FormData
    from aiohttp.test_utils import TestClient, TestServer

    from gateway.app import create_app
    from gateway.config import Config
    from plugins.files import files_plugin, images_plugin
    from tests.support.identities import TestIdentitiesPlugin, bearer
    from tests.support.servers import PostgresForTests

    postgres = PostgresForTests()
    database = postgres.create_database()
    with tempfile.TemporaryDirectory() as data_dir:
        config = Config.load(overrides={
            "core.data_dir": data_dir, "database.url": postgres.database_url(database),
            "auth.jwt_secret": "bench-" + "x" * 40, "auth.admin_password": "bench",
            "auth.service_token": "bench", "plugins.webhooks.webhook_key": "bench",
            "auth.registration_verify_code": "BENCH1"}, environ={})
        app = create_app("gateway", config, plugins=[TestIdentitiesPlugin(), files_plugin, images_plugin])
        client = TestClient(TestServer(app))
        await client.start_server()
        try:
            headers = bearer("bench")
            photos = await asyncio.get_running_loop().run_in_executor(
                None, lambda: [twelve_megapixel_jpeg(seed) for seed in range(count)])
            ids = []
            for index, photo in enumerate(photos):
                form = FormData()
                form.add_field("file", io.BytesIO(photo), filename=f"photo{index}.jpg", content_type="image/jpeg")
                answer = await client.post("/api/v1/files/upload", data=form, headers=headers)
                ids.append((await answer.json())["id"])

            lags: list[float] = []
            stop = asyncio.Event()

            async def monitor() -> None:
                interval = 0.001
                while not stop.is_set():
                    expected = time.perf_counter() + interval
                    await asyncio.sleep(interval)
                    lags.append(max(0.0, time.perf_counter() - expected))

            async def thumbnail(file_id: str) -> int:
                answer = await client.get(f"/api/v1/files/{file_id}/thumbnail", headers=headers)
                body = await answer.read()
                assert answer.status == 200 and answer.content_type == "image/jpeg", answer.status
                return len(body)

            watcher = asyncio.create_task(monitor())
            await asyncio.sleep(0.05)
            started = time.perf_counter()
            await asyncio.gather(*(thumbnail(file_id) for file_id in ids))
            elapsed = time.perf_counter() - started
            stop.set()
            await watcher
            lags.sort()
            p50 = lags[len(lags) // 2] * 1000
            p99 = lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000
            print(f"{count} concurrent thumbnails over HTTP: {elapsed:.2f} s total; event-loop lag "
                  f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {lags[-1] * 1000:.2f} ms "
                  f"({len(lags)} samples; target p99 < 10 ms)")
        finally:
            await client.close()
            postgres.drop_database(database)
            postgres.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrent", type=int, default=20)
    arguments = parser.parse_args()
    single_thumbnail(arguments.rounds)
    asyncio.run(concurrent_lag(arguments.concurrent))


if __name__ == "__main__":
    main()
