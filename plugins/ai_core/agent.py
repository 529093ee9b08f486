"""The offline default agent: answers when no language model is configured (or every model
failed), in the spirit of Home Assistant's built-in conversation agent. It recognises the
assistant's own intents in Chinese and English — greetings, thanks, help, and every registered
tool that declares example phrases — calls the same tools through the same runner, and
otherwise says plainly that no language model is configured and how to add one."""
from __future__ import annotations

import asyncio
import functools
import re
import unicodedata
from dataclasses import dataclass
from .contract import DEFAULT_MAX_MESSAGE_CHARS, SystemInfoEvent
from .tools import Emit, Tool, ToolRegistry, ToolRunner

AGENT_MODEL = "offline-agent"

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_CONTRACTIONS = {"what's": "what is", "whats": "what is", "it's": "it is", "i'm": "i am",
                 "today's": "today is", "you're": "you are", "can't": "can not"}

GREETINGS = {"en": ["hi", "hello", "hey", "good morning", "good afternoon", "good evening", "hello there"],
             "zh": ["你好", "您好", "嗨", "早上好", "下午好", "晚上好", "哈喽"]}
THANKS = {"en": ["thanks", "thank you", "thx", "much appreciated"],
          "zh": ["谢谢", "多谢", "感谢"]}
HELP = {"en": ["help", "what can you do", "how do you work", "what are your abilities", "show me the commands"],
        "zh": ["帮助", "你能做什么", "你会什么", "怎么用", "有什么功能"]}

NO_MODEL_ACTION = "configure_model"


def language_of(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    for short, long in _CONTRACTIONS.items():
        text = re.sub(rf"\b{re.escape(short)}", long, text)
    return re.sub(r"[^\w\s']+", " ", text).strip()


def _units(text: str) -> list[str]:
    """Words for English, characters for Chinese (which has no spaces between words)."""
    units: list[str] = []
    for piece in _normalize(text).split():
        if _CJK.search(piece):
            units.extend(piece)
        else:
            units.append(piece)
    return units


def coverage(example: list[str], text: list[str]) -> float:
    """How much of an example phrase the person's words contain, in order (1.0: all of it).
    In order, so "打开卧室的灯" contains "打开灯" and "what is it" does not contain "is it what"."""
    return TextUnits(text).coverage(example)


class TextUnits:
    """A person's words, ready to be compared with many example phrases. The longest common
    subsequence is computed bit-parallel (Hyyrö 2004): one bit per word of the text, a few
    big-integer operations per word of the phrase, so a long message costs about one pass per
    phrase word in C instead of a Python step per (phrase word, text word) pair (a table of
    100,000 characters against the phrases took seconds, on the event loop)."""

    def __init__(self, units: list[str]):
        self.length = len(units)
        self.all_ones = (1 << self.length) - 1
        self._positions: dict[str, list[int]] = {}
        for index, unit in enumerate(units):
            self._positions.setdefault(unit, []).append(index)
        self._masks: dict[str, int] = {}

    def _mask(self, unit: str) -> int:
        """The text's positions holding `unit`, as bits."""
        mask = self._masks.get(unit)
        if mask is None:
            bits = bytearray((self.length + 7) // 8)
            for index in self._positions.get(unit, ()):
                bits[index >> 3] |= 1 << (index & 7)
            mask = self._masks[unit] = int.from_bytes(bits, "little")
        return mask

    def coverage(self, example: list[str]) -> float:
        if not example:
            return 0.0
        row = self.all_ones  # a 0 bit where the common subsequence grew
        for unit in example:
            matched = row & self._mask(unit)
            row = ((row + matched) | (row - matched)) & self.all_ones
        return (self.length - row.bit_count()) / len(example)


@dataclass
class Match:
    intent: str          # greeting, thanks, help, or tool:<name>
    score: float
    weight: int          # length of the matched phrase: a longer phrase is the more specific
    tool: Tool | None = None


THRESHOLD = 0.8


@functools.lru_cache(maxsize=4096)
def _phrase_units(phrase: str) -> tuple[str, ...]:
    return tuple(_units(phrase))


def best_match(text: str, tools: list[Tool]) -> Match | None:
    """The intent `text` says best, if any. Blocking CPU work, linear in the text's length:
    callers on the event loop run it in a thread."""
    units = _units(text)
    if not units:
        return None
    text_units = TextUnits(units)
    candidates: list[tuple[str, dict[str, list[str]], Tool | None]] = [
        ("greeting", GREETINGS, None), ("thanks", THANKS, None), ("help", HELP, None)]
    candidates += [(f"tool:{tool.name}", tool.examples, tool) for tool in tools if tool.examples]
    best: Match | None = None
    for intent, examples, tool in candidates:
        for phrases in examples.values():
            for phrase in phrases:
                phrase_units = list(_phrase_units(phrase))
                score = text_units.coverage(phrase_units)
                if score < THRESHOLD:
                    continue
                match = Match(intent, score, len(phrase_units), tool)
                if best is None or (match.score, match.weight) > (best.score, best.weight):
                    best = match
    return best


class OfflineAgent:
    def __init__(self, registry: ToolRegistry, runner: ToolRunner, max_command_chars: int = DEFAULT_MAX_MESSAGE_CHARS):
        self.registry = registry
        self.runner = runner
        # A longer message (a pasted document at the OpenAI door) is no command: not matched.
        self.max_command_chars = max_command_chars

    def help_text(self, language: str) -> str:
        tools = [tool for tool in self.registry.all() if tool.examples]
        if language == "zh":
            lines = ["我是内置的离线助手，不需要语言模型也能做这些事："]
            lines += [f"- {tool.description}（例如：“{(tool.examples.get('zh') or tool.examples.get('en') or [''])[0]}”）"
                      for tool in tools]
            lines.append("配置语言模型之后，我就能自由对话了。")
        else:
            lines = ["I'm the built-in offline assistant. Without a language model I can:"]
            lines += [f"- {tool.description} (say: “{(tool.examples.get('en') or tool.examples.get('zh') or [''])[0]}”)"
                      for tool in tools]
            lines.append("Once a language model is configured, I can hold a free conversation too.")
        return "\n".join(lines)

    @staticmethod
    def no_model_notice(language: str) -> SystemInfoEvent:
        if language == "zh":
            message = ("尚未配置语言模型，内置离线助手只能处理问候、时间日期、帮助和已注册的工具。"
                       "管理员可在控制台“模型”页添加一个 OpenAI 兼容的服务（名称、地址、API 密钥）、"
                       "一个模型和 chat 路由，或设置 OPENAI_BASE_URL、OPENAI_API_KEY、DEFAULT_MODEL 后重启 AI 核心。")
        else:
            message = ("No language model is configured, so the built-in offline assistant can only handle "
                       "greetings, the time and date, help and the registered tools. An administrator can add "
                       "an OpenAI-compatible provider (name, base URL, API key), a model and a `chat` route "
                       "on the admin Models page, or set OPENAI_BASE_URL, OPENAI_API_KEY and "
                       "DEFAULT_MODEL and restart the AI core.")
        return {"type": "system_info", "level": "warning", "message": message, "action": NO_MODEL_ACTION}

    async def answer(self, text: str, *, user_id: str, session_id: str | None, emit: Emit,
                     models_failed: bool = False) -> tuple[str, str]:
        """Reply to `text`; return (the reply, the finish reason). With `models_failed` the engine
        has already told the person that the model is unavailable."""
        language = language_of(text)
        # Off the loop: a long message takes a while to compare with every phrase.
        match = (await asyncio.to_thread(best_match, text, self.registry.all())
                 if len(text) <= self.max_command_chars else None)
        if match is None:
            reply = ("抱歉，这个问题我需要语言模型才能回答。你可以问我时间、日期，或者说“帮助”看看我能做什么。"
                     if language == "zh" else
                     "Sorry, I need a language model to answer that. You can ask me the time or the date, "
                     "or say “help” to see what I can do.")
            await emit({"type": "delta", "content": reply})
            if not models_failed:
                await emit(self.no_model_notice(language))
            return reply, "no_model"
        if match.intent == "greeting":
            reply = ("你好！我是你的助手。说“帮助”看看我现在能做什么。" if language == "zh"
                     else "Hello! I'm your assistant. Say “help” to see what I can do right now.")
        elif match.intent == "thanks":
            reply = "不客气！" if language == "zh" else "You're welcome!"
        elif match.intent == "help":
            reply = self.help_text(language)
        else:
            assert match.tool is not None, f"intent {match.intent!r} matched without its tool"  # see best_match
            reply = await self._use_tool(match.tool, text, language, user_id, session_id, emit)
        await emit({"type": "delta", "content": reply})
        return reply, "stop"

    async def _use_tool(self, tool: Tool, text: str, language: str, user_id: str,
                        session_id: str | None, emit: Emit) -> str:
        arguments = await asyncio.to_thread(tool.parse_arguments, text) if tool.parse_arguments else {}
        missing = [key for key in tool.parameters.get("required", ()) if key not in arguments]
        if missing:
            example = (tool.examples.get(language) or tool.examples.get("en") or [tool.name])[0]
            if language == "zh":
                return f"请告诉我{'、'.join(missing)}，例如：“{example} …”。"
            return f"I need the {', '.join(missing)} for that, for example: “{example} …”."
        outcome = await self.runner.run(tool.name, arguments, user_id=user_id, session_id=session_id,
                                        model=AGENT_MODEL, emit=emit)
        if not outcome.ok:
            return (f"调用 {tool.name} 失败：{outcome.error}" if language == "zh"
                    else f"{tool.name} failed: {outcome.error}")
        if tool.summarize:
            return tool.summarize(outcome.result, language)
        return str(outcome.result)
