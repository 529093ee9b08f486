"""The Files endpoints end to end, on both blob backends."""
import hashlib
import io

import aiohttp
from PIL import Image

from tests.files import samples
from tests.files.conftest import blobs_of
from tests.support.identities import bearer

ALICE, BOB, ADMIN = bearer("alice"), bearer("bob"), bearer("admin")


def form(content: bytes, filename: str = "upload.bin", content_type: str = "application/octet-stream",
         field: str = "file") -> aiohttp.FormData:
    data = aiohttp.FormData()
    # A file object: aiohttp streams it (raw bytes this large would warn about blocking the loop).
    data.add_field(field, io.BytesIO(content), filename=filename, content_type=content_type)
    return data


async def upload(client, content: bytes, filename: str = "upload.bin", headers=ALICE, **options) -> dict:
    response = await client.post("/api/v1/files/upload", data=form(content, filename, **options), headers=headers)
    body = await response.json()
    assert response.status == 201, body
    return body


async def error_of(response, status: int, error_type: str) -> dict:
    body = await response.json()
    assert response.status == status, body
    assert body["errorType"] == error_type, body
    assert body["error"]
    return body


async def test_upload_download_and_delete(files_client):
    content = samples.encoded("PNG", (300, 200))
    body = await upload(files_client, content, "../../holiday photo.pdf", content_type="application/pdf")
    assert body["mime_type"] == "image/png"  # the content decides, not the name or the header
    assert body["filename"] == "holiday photo.pdf"
    assert body["size"] == len(content)
    assert body["hash"] == hashlib.sha256(content).hexdigest()
    assert body["user_id"] == "user_alice" and body["is_public"] is False
    assert isinstance(body["created_at"], int) and body["created_at"] > 1_600_000_000_000
    assert body["url"] == f"/api/v1/files/{body['id']}/download"
    assert body["thumbnail_url"] == f"/api/v1/files/{body['id']}/thumbnail"

    response = await files_client.get(f"/api/v1/files/{body['id']}", headers=ALICE)
    assert await response.json() == body

    response = await files_client.get(body["url"], headers=ALICE)
    assert response.status == 200
    assert await response.read() == content
    assert response.headers["Content-Type"] == "image/png"
    assert response.headers["Content-Disposition"].startswith('attachment; filename="holiday photo.pdf"')
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in response.headers["Content-Security-Policy"]
    assert response.headers["Accept-Ranges"] == "bytes"

    blobs = blobs_of(files_client)
    assert await blobs.exists(f"files/{body['id']}")
    await (await files_client.get(body["thumbnail_url"], headers=ALICE)).read()
    assert await blobs.exists(f"thumbnails/{body['id']}.jpg")

    response = await files_client.delete(f"/api/v1/files/{body['id']}", headers=ALICE)
    assert await response.json() == {"status": "deleted"}
    assert not await blobs.exists(f"files/{body['id']}")
    assert not await blobs.exists(f"thumbnails/{body['id']}.jpg")
    await error_of(await files_client.get(f"/api/v1/files/{body['id']}", headers=ALICE), 404, "file_not_found")


async def test_an_executable_named_png_is_refused(files_client):
    response = await files_client.post("/api/v1/files/upload", headers=ALICE,
                                       data=form(samples.WINDOWS_EXE, "cat.png", "image/png"))
    body = await error_of(response, 400, "unsupported_type")
    assert "executable" in body["error"]
    listing = await (await files_client.get("/api/v1/files", headers=ALICE)).json()
    assert listing["total"] == 0


async def test_above_20_mb_is_refused_and_nothing_is_kept(files_client):
    limit = 20 * 1024 * 1024
    too_big = b"a" * (limit + 1)
    response = await files_client.post("/api/v1/files/upload", headers=ALICE,
                                       data=form(too_big, "big.txt", "text/plain"))
    await error_of(response, 400, "file_too_large")
    listing = await (await files_client.get("/api/v1/files", headers=ALICE)).json()
    assert listing["total"] == 0


async def test_exactly_20_mb_is_accepted(local_client, tmp_path):
    content = b"b" * (20 * 1024 * 1024)
    body = await upload(local_client, content, "exact.txt", content_type="text/plain")
    assert body["size"] == len(content) and body["mime_type"] == "text/plain"
    blob_files = [p for p in (tmp_path / "data" / "blobs" / "files").iterdir()]
    assert [p.name for p in blob_files] == [body["id"]]  # no temporary part left behind


async def test_upload_needs_a_file_field_and_a_token(local_client):
    await error_of(await local_client.post("/api/v1/files/upload", data=form(b"x", field="other"),
                                           headers=ALICE), 400, "validation_error")
    await error_of(await local_client.post("/api/v1/files/upload", json={"file": "x"}, headers=ALICE),
                   400, "validation_error")
    await error_of(await local_client.post("/api/v1/files/upload", data=form(b"hello", "a.txt")), 401,
                   "unauthorized")
    await error_of(await local_client.get("/api/v1/files"), 401, "unauthorized")


async def test_listing_pages_and_owners(local_client):
    ids = [(await upload(local_client, f"note {n}".encode(), f"n{n}.txt"))["id"] for n in range(3)]
    await upload(local_client, b"bob's", "bob.txt", headers=BOB)

    listing = await (await local_client.get("/api/v1/files", headers=ALICE)).json()
    assert (listing["total"], listing["page"], listing["limit"]) == (3, 1, 20)
    assert [f["id"] for f in listing["files"]] == ids[::-1]  # newest first
    assert all("thumbnail_url" not in f for f in listing["files"])  # images only

    page_two = await (await local_client.get("/api/v1/files?page=2&limit=2", headers=ALICE)).json()
    assert page_two["total"] == 3 and [f["id"] for f in page_two["files"]] == [ids[0]]

    everything = await (await local_client.get("/api/v1/files", headers=ADMIN)).json()
    assert everything["total"] == 4
    bobs = await (await local_client.get("/api/v1/files?user_id=user_bob", headers=ADMIN)).json()
    assert [f["filename"] for f in bobs["files"]] == ["bob.txt"]

    await error_of(await local_client.get("/api/v1/files?user_id=user_bob", headers=ALICE), 403, "forbidden")
    await error_of(await local_client.get("/api/v1/files?limit=0", headers=ALICE), 400, "validation_error")
    await error_of(await local_client.get("/api/v1/files?page=x", headers=ALICE), 400, "validation_error")


async def test_users_reach_only_their_own_files_and_the_administrator_all(local_client):
    body = await upload(local_client, b"secret", "secret.txt")
    for path in [f"/api/v1/files/{body['id']}", body["url"], f"/api/v1/files/{body['id']}/thumbnail"]:
        await error_of(await local_client.get(path, headers=BOB), 404, "file_not_found")
    await error_of(await local_client.delete(f"/api/v1/files/{body['id']}", headers=BOB), 404, "file_not_found")
    response = await local_client.get(body["url"], headers=ADMIN)
    assert await response.read() == b"secret"
    await error_of(await local_client.get("/api/v1/files/not-a-uuid", headers=ALICE), 404, "file_not_found")
    assert (await local_client.delete(f"/api/v1/files/{body['id']}", headers=ADMIN)).status == 200


async def test_byte_ranges(files_client):
    content = bytes(range(256)) * 4
    body = await upload(files_client, samples.PDF + content, "doc.pdf")
    stored = samples.PDF + content
    size = len(stored)

    response = await files_client.get(body["url"], headers={**ALICE, "Range": "bytes=0-9"})
    assert response.status == 206
    assert await response.read() == stored[:10]
    assert response.headers["Content-Range"] == f"bytes 0-9/{size}"
    assert response.headers["Content-Length"] == "10"

    response = await files_client.get(body["url"], headers={**ALICE, "Range": "bytes=100-"})
    assert response.status == 206 and await response.read() == stored[100:]

    response = await files_client.get(body["url"], headers={**ALICE, "Range": "bytes=-5"})
    assert response.status == 206 and await response.read() == stored[-5:]

    response = await files_client.get(body["url"], headers={**ALICE, "Range": f"bytes=10-{size + 50}"})
    assert response.status == 206 and await response.read() == stored[10:]

    response = await files_client.get(body["url"], headers={**ALICE, "Range": f"bytes={size}-"})
    await error_of(response, 416, "range_not_satisfiable")
    assert response.headers["Content-Range"] == f"bytes */{size}"

    # Positions longer than int() reads (4,300 digits) were a 500; RFC 9110 reads them as past the end.
    huge = "9" * 5000
    response = await files_client.get(body["url"], headers={**ALICE, "Range": f"bytes=0-{huge}"})
    assert response.status == 206 and await response.read() == stored
    assert response.headers["Content-Range"] == f"bytes 0-{size - 1}/{size}"
    response = await files_client.get(body["url"], headers={**ALICE, "Range": f"bytes=-{huge}"})
    assert response.status == 206 and await response.read() == stored
    response = await files_client.get(body["url"], headers={**ALICE, "Range": f"bytes={huge}-"})
    await error_of(response, 416, "range_not_satisfiable")
    response = await files_client.get(body["url"], headers={**ALICE, "Range": f"bytes={'0' * 5000}5-9"})
    assert response.status == 206 and await response.read() == stored[5:10]

    response = await files_client.get(body["url"], headers={**ALICE, "Range": "bytes=0-1,5-6"})
    assert response.status == 200 and await response.read() == stored  # several ranges: whole file

    response = await files_client.head(body["url"], headers=ALICE)
    assert response.status == 200 and response.headers["Content-Length"] == str(size)


async def test_a_vanished_stored_object_answers_file_missing(files_client):
    image = await upload(files_client, samples.encoded("JPEG"), "a.jpg")
    await blobs_of(files_client).delete(f"files/{image['id']}")
    await error_of(await files_client.get(image["url"], headers=ALICE), 404, "file_missing")
    await error_of(await files_client.get(image["thumbnail_url"], headers=ALICE), 404, "file_missing")
    await error_of(await files_client.get(f"/api/v1/images/analyze/{image['id']}", headers=ALICE),
                   404, "file_missing")
    assert (await files_client.delete(f"/api/v1/files/{image['id']}", headers=ALICE)).status == 200


async def test_svg_is_never_served_as_an_active_document(local_client):
    body = await upload(local_client, samples.SVG_WITH_SCRIPT, "logo.svg", content_type="image/svg+xml")
    assert body["mime_type"] == "image/svg+xml"
    response = await local_client.get(body["url"], headers=ALICE)
    assert await response.read() == samples.SVG_WITH_SCRIPT
    assert response.headers["Content-Disposition"].startswith("attachment;")
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    csp = response.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "sandbox" in csp and "script" not in csp
    # Its thumbnail is our own static icon, not the uploaded document.
    response = await local_client.get(body["thumbnail_url"], headers=ALICE)
    thumbnail = await response.read()
    assert response.headers["Content-Type"] == "image/svg+xml"
    assert b"<script" not in thumbnail and b"SVG" in thumbnail


async def test_thumbnails_are_small_upright_jpegs_made_once(files_client):
    # 1200x800 stored sideways (orientation 6: displayed rotated 90 degrees clockwise).
    body = await upload(files_client, samples.photo_jpeg(1200, 800, orientation=6), "photo.jpg")
    response = await files_client.get(body["thumbnail_url"], headers=ALICE)
    assert response.status == 200
    assert response.headers["Content-Type"] == "image/jpeg"
    assert response.headers["Cache-Control"] == "public, max-age=86400"
    first = await response.read()
    with Image.open(io.BytesIO(first)) as thumbnail:
        assert thumbnail.format == "JPEG"
        assert thumbnail.size == (200, 300)
        # Stored with the sky on top; turned 90 degrees clockwise, the sky is on the right.
        left, right = thumbnail.getpixel((10, 150)), thumbnail.getpixel((190, 150))
        assert right[2] > 200 and left[1] > left[2] and left[2] < 100

    cached = await blobs_of(files_client).read_all(f"thumbnails/{body['id']}.jpg")
    assert cached == first
    again = await (await files_client.get(body["thumbnail_url"], headers=ALICE)).read()
    assert again == first


async def test_thumbnail_of_transparent_and_small_images(local_client):
    for image_format, size in [("PNG", (40, 20)), ("GIF", (500, 100)), ("WEBP", (900, 900))]:
        body = await upload(local_client, samples.encoded(image_format, size), f"a.{image_format.lower()}")
        response = await local_client.get(body["thumbnail_url"], headers=ALICE)
        with Image.open(io.BytesIO(await response.read())) as thumbnail:
            assert thumbnail.format == "JPEG"
            assert max(thumbnail.size) <= 300
            assert thumbnail.size == ((40, 20) if size == (40, 20) else (300, 60) if size == (500, 100)
                                      else (300, 300))


async def test_placeholder_icons_for_other_kinds(local_client):
    labels = {}
    for content, name in [(samples.PDF, "a.pdf"), (b"hello", "a.txt"), (samples.MP3, "a.mp3"),
                          (samples.MP4, "a.mp4"), (samples.docx(), "a.docx")]:
        body = await upload(local_client, content, name)
        response = await local_client.get(f"/api/v1/files/{body['id']}/thumbnail", headers=ALICE)
        assert response.status == 200
        assert response.headers["Content-Type"] == "image/svg+xml"
        assert response.headers["Cache-Control"] == "public, max-age=86400"
        labels[name] = await response.read()
    assert b">PDF<" in labels["a.pdf"] and b">TXT<" in labels["a.txt"] and b">AUDIO<" in labels["a.mp3"]
    assert b">VIDEO<" in labels["a.mp4"] and b">DOC<" in labels["a.docx"]


async def test_a_decompression_bomb_is_a_400(files_client):
    response = await files_client.post("/api/v1/files/upload", headers=ALICE,
                                       data=form(samples.bomb_png(), "bomb.png", "image/png"))
    body = await error_of(response, 400, "image_too_large")
    assert "pixels" in body["error"]
    listing = await (await files_client.get("/api/v1/files", headers=ALICE)).json()
    assert listing["total"] == 0


async def test_truncated_and_corrupt_images_are_answered_cleanly(local_client):
    photo = samples.photo_jpeg(800, 600)
    truncated = await upload(local_client, photo[:len(photo) // 2], "cut.jpg")
    response = await local_client.get(truncated["thumbnail_url"], headers=ALICE)
    assert response.status == 200 and response.headers["Content-Type"] == "image/svg+xml"
    await error_of(await local_client.get(f"/api/v1/images/analyze/{truncated['id']}", headers=ALICE),
                   400, "invalid_image")

    # Magic number of a PNG and nothing that Pillow can read after it.
    response = await local_client.post("/api/v1/files/upload", headers=ALICE,
                                       data=form(b"\x89PNG\r\n\x1a\n" + b"\xff" * 100, "broken.png"))
    await error_of(response, 400, "invalid_image")
