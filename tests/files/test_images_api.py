"""Image analysis: measurements, EXIF, the local description, and the AI core's vision
contract served by a loopback server that speaks it (the real AI core is tested in its own
suite)."""
import base64
import io

import pytest
from aiohttp import web
from PIL import Image

from tests.files import samples
from tests.files.test_files_api import ALICE, BOB, error_of, form, upload


async def test_analysis_of_an_uploaded_photo_with_exif(local_client):
    photo = samples.photo_jpeg(1200, 800, orientation=6, make="Canon", model="Canon EOS 80D",
                               taken="2023:05:01 14:22:10")
    stored = await upload(local_client, photo, "IMG_0001.JPG")
    response = await local_client.get(f"/api/v1/images/analyze/{stored['id']}", headers=ALICE)
    result = await response.json()
    assert response.status == 200, result
    assert result["format"] == "JPEG"
    assert (result["width"], result["height"]) == (800, 1200)  # as displayed, EXIF orientation applied
    assert result["file_size"] == len(photo)
    assert result["analyzed_by"] == "local"
    exif = result["exif"]
    assert exif["Make"] == "Canon" and exif["Model"] == "Canon EOS 80D"
    assert exif["Orientation"] == 6
    assert exif["DateTimeOriginal"] == "2023:05:01 14:22:10"
    assert exif["ExposureTime"] == "1/250" and exif["FNumber"] == 2.8
    assert all(isinstance(key, str) for key in exif)

    colours = result["top_colors"]
    assert 99 <= sum(c["percent"] for c in colours) <= 101
    assert all(c["hex"].startswith("#") and len(c["hex"]) == 7 for c in colours)
    assert colours == sorted(colours, key=lambda c: -c["percent"])
    hexes = [c["hex"] for c in colours[:2]]
    assert any(int(h[5:7], 16) > 200 for h in hexes)  # the sky
    assert any(int(h[3:5], 16) > int(h[5:7], 16) + 40 for h in hexes)  # the grass

    description = result["description"]
    assert "portrait" in description and "800 × 1200" in description
    assert "Canon EOS 80D" in description and "1 May 2023" in description
    assert "sky blue" in description and "green" in description

    same = await (await local_client.post("/api/v1/images/analyze", json={"file_id": stored["id"]},
                                          headers=ALICE)).json()
    assert same == result


@pytest.mark.parametrize("field", ["file", "image"])
async def test_analysis_of_a_posted_image(local_client, field):
    gif = samples.encoded("GIF", (120, 120))
    response = await local_client.post("/api/v1/images/analyze", headers=ALICE,
                                       data=form(gif, "a.gif", "image/gif", field=field))
    result = await response.json()
    assert response.status == 200, result
    assert (result["format"], result["width"], result["height"]) == ("GIF", 120, 120)
    assert result["exif"] == {} and "square" in result["description"]
    listing = await (await local_client.get("/api/v1/files", headers=ALICE)).json()
    assert listing["total"] == 0  # analysing is not storing


async def test_analysis_refusals(local_client):
    webp = samples.encoded("WEBP")
    await error_of(await local_client.post("/api/v1/images/analyze", headers=ALICE,
                                           data=form(webp, "a.webp", "image/webp")), 400, "unsupported_type")
    await error_of(await local_client.post("/api/v1/images/analyze", headers=ALICE,
                                           data=form(samples.ELF, "a.png", "image/png")), 400, "unsupported_type")
    big = b"\xff\xd8\xff" + b"\x00" * (10 * 1024 * 1024)
    await error_of(await local_client.post("/api/v1/images/analyze", headers=ALICE,
                                           data=form(big, "big.jpg", "image/jpeg")), 400, "file_too_large")
    await error_of(await local_client.post("/api/v1/images/analyze", headers=ALICE,
                                           data=form(samples.bomb_png(), "bomb.png", "image/png")),
                   400, "image_too_large")
    await error_of(await local_client.post("/api/v1/images/analyze", headers=ALICE,
                                           data=form(b"\xff\xd8\xff\xe0garbage", "x.jpg", "image/jpeg")),
                   400, "invalid_image")
    await error_of(await local_client.post("/api/v1/images/analyze", headers=ALICE, json={}),
                   400, "validation_error")
    await error_of(await local_client.post("/api/v1/images/analyze", headers=ALICE, data=form(b"x", field="other")),
                   400, "validation_error")
    await error_of(await local_client.post("/api/v1/images/analyze", json={"file_id": "x"}), 401, "unauthorized")

    pdf = await upload(local_client, samples.PDF, "doc.pdf")
    await error_of(await local_client.get(f"/api/v1/images/analyze/{pdf['id']}", headers=ALICE),
                   400, "unsupported_type")
    photo = await upload(local_client, samples.photo_jpeg(200, 100), "p.jpg")
    await error_of(await local_client.get(f"/api/v1/images/analyze/{photo['id']}", headers=BOB),
                   404, "file_not_found")


@pytest.fixture
async def vision_peer(aiohttp_server):
    """A loopback server speaking the AI core's vision contract; `mode` picks its answer."""
    state = {"mode": "describe", "requests": []}

    async def describe(request: web.Request) -> web.Response:
        body = await request.json()
        state["requests"].append({"authorization": request.headers.get("Authorization"), **body})
        if state["mode"] == "no_model":
            return web.json_response({"error": "No model is routed for vision.", "errorType": "no_vision_model"},
                                     status=404)
        if state["mode"] == "failed":
            return web.json_response({"error": "Every vision model failed.", "errorType": "vision_failed"},
                                     status=502)
        header, _, data = body["image"].partition(",")
        assert header == "data:image/jpeg;base64"
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            width, height = image.size
        return web.json_response({"description": f"A meadow under a blue sky ({width}x{height} seen).",
                                  "model": "vision-test-model"})

    app = web.Application()
    app.router.add_post("/api/v1/vision/describe", describe)
    server = await aiohttp_server(app)
    state["url"] = str(server.make_url("")).rstrip("/")
    return state


async def test_the_description_comes_from_the_vision_model_when_one_answers(make_files_client, vision_peer):
    client = await make_files_client("local", {"peers.ai_core_url": vision_peer["url"]})
    stored = await upload(client, samples.photo_jpeg(3000, 2000, orientation=6), "big.jpg")
    result = await (await client.get(f"/api/v1/images/analyze/{stored['id']}", headers=ALICE)).json()
    assert result["analyzed_by"] == "openai_vision"
    # The model is shown an upright preview of at most 1024 pixels, not the 6-megapixel original.
    assert result["description"] == "A meadow under a blue sky (683x1024 seen)."
    assert result["model"] == "vision-test-model"
    assert (result["width"], result["height"]) == (2000, 3000)
    assert result["exif"]["Make"] == "Canon" and result["top_colors"]

    sent = vision_peer["requests"][-1]
    assert sent["authorization"] == "Bearer test-service-token"
    assert sent["user_id"] == "user_alice" and sent["prompt"]

    for mode in ("no_model", "failed"):
        vision_peer["mode"] = mode
        result = await (await client.get(f"/api/v1/images/analyze/{stored['id']}", headers=ALICE)).json()
        assert result["analyzed_by"] == "local"
        assert "Canon EOS 80D" in result["description"]
