"""Images: the vision contract for the image-analysis plugin, attachments in the chat call
handed to a vision model as base64, the guarded fetcher, and the seeding from the environment."""
import base64

from tests.ai_core.conftest import ALICE, SERVICE, configure, read_events, text_of
from tests.support.fake_openai import PIXEL_PNG

DATA_URI = "data:image/png;base64," + base64.b64encode(PIXEL_PNG).decode()


async def describe(client, **body):
    response = await client.post("/api/v1/vision/describe", headers=SERVICE, json=body)
    return response.status, await response.json()


async def test_vision_describe_contract(ai_core, provider):
    status, body = await describe(ai_core, image=DATA_URI)
    assert status == 404 and body["errorType"] == "no_vision_model"
    await configure(ai_core, provider, {"blind": "broken"}, chain=["blind"], purpose="vision", tags=["vision"])
    status, body = await describe(ai_core, image=DATA_URI)
    assert status == 502 and body["errorType"] == "vision_failed"
    await configure(ai_core, provider, {"eye": "ok"}, chain=["blind", "eye"], purpose="vision", tags=["vision"])
    status, body = await describe(ai_core, image=DATA_URI, prompt="What is in it?", user_id="user_alice")
    assert (status, body) == (200, {"description": "Hello from upstream-eye.", "model": "eye"})
    content = provider.requests[-1]["body"]["messages"][0]["content"]
    assert content == [{"type": "text", "text": "What is in it?"},
                       {"type": "image_url", "image_url": {"url": DATA_URI}}]
    status, body = await describe(ai_core, image="data:image/png;base64,@@@")
    assert status == 400 and body["errorType"] == "invalid_image"


async def test_image_urls_are_fetched_through_the_guard(make_ai_core, provider, ai_settings):
    strict = await make_ai_core()
    await configure(strict, provider, {"eye": "ok"}, tags=["vision"])
    status, body = await describe(strict, image=f"{provider.url}/files/pixel.png")
    assert status == 400 and "private address" in body["error"]
    status, body = await describe(strict, image="file:///etc/passwd")
    assert status == 400 and body["errorType"] == "invalid_image"
    status, body = await describe(strict, image="http://example.com:not-a-port/x.png")
    assert status == 400 and body["errorType"] == "invalid_image"

    ai_settings["fetch_allow_private"] = True
    allowing = await make_ai_core()
    status, body = await describe(allowing, image=f"{provider.url}/files/pixel.png")
    assert status == 200 and body["model"] == "eye"
    assert provider.requests[-1]["body"]["messages"][0]["content"][1]["image_url"]["url"] == DATA_URI
    # A redirect to the cloud metadata address is checked again and refused.
    status, body = await describe(allowing, image=f"{provider.url}/files/moved")
    assert status == 400 and "169.254.169.254" in body["error"]


async def test_chat_attachments_go_to_the_vision_route(ai_core, provider):
    await configure(ai_core, provider, {"talker": "ok"}, chain=["talker"])
    # No vision model yet: the answer comes without the image, and says so.
    events = await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE, json={
        "text": "what is this?", "attachments": [{"type": "image", "url": DATA_URI, "filename": "p.png"}]}))
    assert events[0]["type"] == "system_info" and events[0]["action"] == "configure_vision_model"
    assert events[-1]["model"] == "talker"
    await configure(ai_core, provider, {"eye": "ok"}, chain=["eye"], purpose="vision", tags=["vision"])
    events = await read_events(await ai_core.post("/api/v1/chat/stream", headers=ALICE, json={
        "text": "what is this?", "mode": "voice_msg", "attachments": [{"url": DATA_URI}]}))
    assert text_of(events) == "Hello from upstream-eye." and events[-1]["model"] == "eye"
    messages = provider.requests[-1]["body"]["messages"]
    assert "spoken aloud" in messages[0]["content"]
    assert messages[-1]["content"][1] == {"type": "image_url", "image_url": {"url": DATA_URI}}


async def test_the_environment_seeds_a_provider_model_and_route_once(make_ai_core, provider):
    overrides = {"plugins.ai_core.openai_base_url": f"{provider.url}/ok/v1", "plugins.ai_core.openai_api_key": "sk-env",
                 "plugins.ai_core.default_model": "gpt-env"}
    client = await make_ai_core(overrides=overrides)
    events = await read_events(await client.post("/api/v1/chat/stream", headers=ALICE, json={"text": "hi"}))
    assert events[-1]["model"] == "gpt-env" and provider.requests[-1]["authorization"] == "Bearer sk-env"
    assert (await client.delete("/api/v1/models/routing/chat", headers=SERVICE)).status == 200
    assert (await client.delete("/api/v1/models/models/gpt-env", headers=SERVICE)).status == 200
    again = await make_ai_core(overrides=overrides)  # a restart does not undo the administrator's edits
    events = await read_events(await again.post("/api/v1/chat/stream", headers=ALICE, json={"text": "hello"}))
    assert events[-1]["model"] == "offline-agent"
