"""The complete example of docs/plugins.md runs as written: its settings, contract, routes,
OpenAPI entries, WebSocket frame and push to the user's devices."""
import re
import sys
from pathlib import Path

import pytest

from gateway.app import create_app
from gateway.context import get_context
from gateway.identity import Identity
from plugins.ai_core import client_plugin as ai_core_client_plugin
from plugins.auth import tokens_plugin
from plugins.auth.contract import TOKENS
from plugins.chat import plugin as chat_plugin
from plugins.sessions import plugin as sessions_plugin
from tests.support.servers import free_port

DOCS = Path(__file__).parents[2] / "docs" / "plugins.md"


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The documented package, written out from the page's code blocks and imported."""
    text = DOCS.read_text()
    blocks = dict(re.findall(r"`bookmarks_plugin/([a-z_]+\.py)`[^`]*?```python\n(.*?)```", text, re.S))
    sql = re.search(r"```sql\n(.*?)```", text, re.S).group(1)
    package = tmp_path / "bookmarks_plugin"
    (package / "migrations").mkdir(parents=True)
    for name, code in blocks.items():
        (package / name).write_text(code)
    (package / "migrations" / "001_create_bookmarks.sql").write_text(sql)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("bookmarks_plugin", None)
    sys.modules.pop("bookmarks_plugin.contract", None)
    import bookmarks_plugin

    bookmarks_plugin.plugin.name = "bookmarks"
    yield bookmarks_plugin
    sys.modules.pop("bookmarks_plugin", None)
    sys.modules.pop("bookmarks_plugin.contract", None)


async def test_the_documented_plugin_works(example, aiohttp_client, make_config, database_url):
    config = make_config({"database.url": database_url, "peers.ai_core_url": f"http://127.0.0.1:{free_port()}",
                          "plugins.bookmarks": {"max_per_user": 1}})
    app = create_app("gateway", config, plugins=[tokens_plugin, sessions_plugin, ai_core_client_plugin,
                                                 chat_plugin, example.plugin])
    client = await aiohttp_client(app)
    token, _ = get_context(app).contracts.require(TOKENS).issue_access(Identity("admin", "admin", is_admin=True))
    headers = {"Authorization": f"Bearer {token}"}
    async with client.ws_connect(f"/ws/chat?token={token}&session_id=bookmarks") as ws:
        # The AI core is down: the bookmark is saved without a title, and every device hears of it.
        added = await client.post("/api/v1/bookmarks", json={"url": "https://example.org/"}, headers=headers)
        assert added.status == 201, await added.text()
        assert (await added.json())["title"] == ""
        pushed = await ws.receive_json(timeout=5)
        assert pushed["type"] == "bookmark_added" and pushed["url"] == "https://example.org/"
        # The settings schema's limit, answered on the socket as an error frame with its errorType.
        await ws.send_json({"type": "bookmark_add", "url": "https://example.com/"})
        refused = await ws.receive_json(timeout=5)
        assert refused["type"] == "error" and refused["errorType"] == "too_many_bookmarks"
    listed = await (await client.get("/api/v1/bookmarks", headers=headers)).json()
    assert listed["total"] == 1
    assert await get_context(app).contracts.require(example.contract.BOOKMARKS).count("admin") == 1
    document = await (await client.get("/api/v1/openapi.json")).json()
    assert document["paths"]["/api/v1/bookmarks"]["post"]["summary"] == "Save a bookmark"


def test_the_documented_settings_are_checked(example, make_config):
    from gateway.plugins import PluginError

    with pytest.raises(PluginError, match="plugins.bookmarks.max_per_usr"):
        create_app("gateway", make_config({"plugins.bookmarks": {"max_per_usr": 5}}),
                   plugins=[tokens_plugin, ai_core_client_plugin, example.plugin])
