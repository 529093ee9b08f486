"""What the person is told when no language model answers: the offline agent answers instead
(`model_unavailable_notice`), and the administrator is shown, once a session, where to connect
a model (`connect_model_notice`, at the console's Model Config page)."""
from __future__ import annotations

from gateway.config import Config
from gateway.text import language_of

from .contract import Fallback, SystemInfoEvent
from .settings import AiCoreSettings


def model_unavailable_notice(text: str, fallbacks: list[Fallback]) -> SystemInfoEvent:
    """What the person is told when every routed model failed and the offline agent answers."""
    refused = all(fallback["kind"] == "refused" for fallback in fallbacks)
    if language_of(text) == "zh":
        message = ("语言模型的地址不被允许访问（出站策略），由内置离线助手代答；请管理员检查模型服务的地址设置。"
                   if refused else "语言模型暂时不可用，由内置离线助手代答；请稍后再试。")
    else:
        message = ("The language model's address is not allowed by the server's egress policy, so the "
                   "built-in offline assistant answers instead; an administrator can allow it."
                   if refused else "The language model is unavailable right now, so the built-in offline "
                                   "assistant answers instead; try again in a moment.")
    return {"type": "system_info", "level": "warning", "message": message,
            "action": "configure_model" if refused else "retry"}


# The console's page where the administrator connects a model (spec/console.md, "Model Config").
MODEL_CONFIG_PATH = "model-config"
LOOPBACK = "127.0.0.1"


def console_address(settings: AiCoreSettings, config: Config) -> str:
    """The console's Model Config page: `[plugins.ai_core] console_url`, else the console's own
    address from `[console]` (the operator's machine)."""
    base = settings.console_url or ""
    if not base:
        console = config.settings.console
        host = LOOPBACK if console.host in ("0.0.0.0", "::", "") else console.host
        base = f"http://{host}:{console.port}/"
    return base.rstrip("/") + "/" + MODEL_CONFIG_PATH


def connect_model_notice(language: str, address: str) -> SystemInfoEvent:
    """What the administrator is told, once a session, when the offline agent could not help."""
    if language == "zh":
        message = f"还没有连接语言模型，所以我只能做“帮助”里列出的事。可以在控制台的“模型配置”页连接一个：{address}"
    else:
        message = (f"No language model is connected, so I can only do what “help” lists. "
                   f"Connect one on the console's Model Config page: {address}")
    return {"type": "system_info", "level": "info", "message": message, "action": "configure_model"}

