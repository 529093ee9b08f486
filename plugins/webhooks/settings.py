"""`[plugins.webhooks]` (docs/configuration.md)."""
from dataclasses import dataclass

from marshmallow import fields, validate

from gateway.plugin_settings import PluginSettings, setting
from plugins.ai_core.contract import DEFAULT_MAX_MESSAGE_CHARS


@dataclass(frozen=True, kw_only=True)
class WebhooksSettings(PluginSettings):
    webhook_key: str = setting(fields.String(load_default="", metadata={
        "description": "The key callers send as `X-Webhook-Key` (WEBHOOK_KEY); generated into "
                       "DATA_DIR/secrets.json when unset (read it there). Formerly `[auth] webhook_key`, "
                       "still read there."}))
    discord_public_key: str = setting(fields.String(load_default="", metadata={
        "description": "The Discord application's public key, 64 hex digits from the developer portal "
                       "(DISCORD_PUBLIC_KEY); a malformed one stops start-up. Formerly `[auth] "
                       "discord_public_key`, still read there."}))
    max_message_chars: int = setting(fields.Integer(load_default=DEFAULT_MAX_MESSAGE_CHARS, validate=validate.Range(min=1), metadata={
        "description": "Longest message of a webhook (generic `message`, Discord's `message` option); past it "
                       "413 message_too_long, before any session or turn."}))
    ai_timeout: float = setting(fields.Float(load_default=120.0, validate=validate.Range(min=0, min_inclusive=False), metadata={
        "description": "Seconds to wait for the whole reply to a webhook message."}))
    discord_defer_after: float = setting(fields.Float(load_default=2.5, validate=validate.Range(min=0, max=2.9), metadata={
        "description": "Seconds a Discord command waits for the reply before answering deferred (type 5) and "
                       "sending the reply through the interaction's follow-up webhook; Discord waits 3."}))
    discord_api_url: str = setting(fields.String(load_default="https://discord.com/api/v10", metadata={
        "description": "Discord's API root, for interaction follow-ups (a test's local server)."}))
