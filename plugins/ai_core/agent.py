"""The offline default agent: answers when no language model is configured (or every model
failed), in the spirit of Home Assistant's built-in conversation agent. It recognises the
assistant's own intents in Chinese and English — greetings, thanks, help, and every registered
tool that declares example phrases — calls the same tools through the same runner, and
otherwise says in one sentence that it cannot answer that (the engine tells the administrator,
once a session, how to connect a model)."""
from __future__ import annotations

import asyncio
import functools
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.text import HAN, language_of

from .contract import DEFAULT_MAX_MESSAGE_CHARS
from .tools import Emit, Tool, ToolRegistry, ToolRunner

if TYPE_CHECKING:
    from .confirmation import Confirmations

AGENT_MODEL = "offline-agent"

_CONTRACTIONS = {"what's": "what is", "whats": "what is", "it's": "it is", "i'm": "i am",
                 "today's": "today is", "you're": "you are", "can't": "can not"}

GREETINGS = {"en": ["hi", "hello", "hey", "good morning", "good afternoon", "good evening", "hello there"],
             "zh": ["你好", "您好", "嗨", "早上好", "下午好", "晚上好", "哈喽"]}
THANKS = {"en": ["thanks", "thank you", "thx", "much appreciated"],
          "zh": ["谢谢", "多谢", "感谢"]}
HELP = {"en": ["help", "what can you do", "how do you work", "what are your abilities", "show me the commands"],
        "zh": ["帮助", "你能做什么", "你会什么", "怎么用", "有什么功能"]}




def _normalize(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    for short, long in _CONTRACTIONS.items():
        text = re.sub(rf"\b{re.escape(short)}", long, text)
    return re.sub(r"[^\w\s']+", " ", text).strip()


def _units(text: str) -> list[str]:
    """Words for English, characters for Chinese (which has no spaces between words)."""
    units: list[str] = []
    for piece in _normalize(text).split():
        if HAN.search(piece):
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


def is_help_request(text: str) -> bool:
    """The whole message asks what the assistant can do ("help", "你能做什么"), and nothing more:
    help is composed from the tools whatever answers the rest, a model or this agent."""
    units = _units(text)
    return bool(units) and any(_units(phrase) == units for phrases in HELP.values() for phrase in phrases)


HELP_HEAD = {"en": "Here is what you can ask me:", "zh": "你可以这样跟我说："}
HELP_NOTHING = {"en": "Right now I can only chat a little: no skills are available.",
                "zh": "现在我只能简单聊几句：还没有可用的功能。"}
HELP_ANYTHING = {"en": "Or just ask me anything.", "zh": "也可以直接问我任何问题。"}
UNKNOWN = {"en": "Sorry, I can't answer that without a language model. Say “help” to see what I can do.",
           "zh": "抱歉，没有语言模型我回答不了这个问题。说“帮助”看看我能做什么。"}
UNKNOWN_ASK_ADMIN = {
    "en": "Sorry, I can't answer that yet: your administrator can connect a language model. "
          "Say “help” to see what I can do.",
    "zh": "抱歉，我暂时回答不了这个问题：管理员连接语言模型之后就可以了。说“帮助”看看我能做什么。"}
NEED_MORE = {"en": "Tell me a little more, for example: “{example}”.", "zh": "请说得具体一点，例如：“{example}”。"}
COULD_NOT = {"en": "Sorry, I couldn't do that just now.", "zh": "抱歉，这件事现在没能办成。"}


def _words(table: dict[str, str], language: str) -> str:
    return table.get(language) or table["en"]


class OfflineAgent:
    def __init__(self, registry: ToolRegistry, runner: ToolRunner, max_command_chars: int = DEFAULT_MAX_MESSAGE_CHARS,
                 confirmations: "Confirmations | None" = None):
        self.registry = registry
        self.runner = runner
        # A person's own command with an effect to confirm ("unlock the front door") is asked
        # about too, as a model's call is: the words may be a message they only passed on.
        self.confirmations = confirmations
        # A longer message (a pasted document at the OpenAI door) is no command: not matched.
        self.max_command_chars = max_command_chars

    # Examples shown per topic in help.
    HELP_EXAMPLES = 3

    async def help_for(self, language: str, *, user_id: str, session_id: str | None,
                       with_model: bool = False) -> str:
        """Help listing the tools that can work now for this person (their `available` check)."""
        tools = await self.runner.available(self.registry.in_order(), user_id=user_id, session_id=session_id,
                                            language=language)
        return self.help_text(language, tools, with_model=with_model)

    def help_text(self, language: str, tools: list[Tool], *, with_model: bool = False) -> str:
        """What a person can say, by topic, from what `tools` say of themselves (their `topic`
        and `help` in the person's language); "ask me anything" only when a model answers the
        rest."""
        by_tool: dict[str, list[list[str]]] = {}
        for tool in tools:
            topic = tool.topic.get(language) or tool.topic.get("en")
            examples = tool.help.get(language) or tool.help.get("en") or []
            if topic and examples:
                by_tool.setdefault(topic, []).append(list(examples))
        topics: dict[str, list[str]] = {}
        for topic, lists in by_tool.items():  # each tool's first example, then each one's second...
            said = topics[topic] = []
            for rank in range(max(len(examples) for examples in lists)):
                said += [examples[rank] for examples in lists if rank < len(examples) and examples[rank] not in said]
        if not topics:
            lines = [_words(HELP_NOTHING, language)]
        else:
            quote = "、" if language == "zh" else ", "
            lines = [_words(HELP_HEAD, language)]
            lines += [f"- {topic}{'：' if language == 'zh' else ': '}"
                      + quote.join(f"“{example}”" for example in examples[:self.HELP_EXAMPLES])
                      for topic, examples in topics.items()]
        if with_model:
            lines.append(_words(HELP_ANYTHING, language))
        return "\n".join(lines)

    async def answer(self, text: str, *, user_id: str, session_id: str | None, emit: Emit,
                     models_failed: bool = False, is_admin: bool = False) -> tuple[str, str]:
        """Reply to `text`; return (the reply, the finish reason: `no_model` when it could not
        help). With `models_failed` the engine has already told the person that the model is
        unavailable. Only the administrator can connect a model: others are told to ask them."""
        language = language_of(text)
        # Off the loop: a long message takes a while to compare with every phrase.
        match = (await asyncio.to_thread(best_match, text, self.registry.all())
                 if len(text) <= self.max_command_chars else None)
        if match is None:
            reply = _words(UNKNOWN if is_admin or models_failed else UNKNOWN_ASK_ADMIN, language)
            await emit({"type": "delta", "content": reply})
            return reply, "no_model"
        if match.intent == "greeting":
            reply = ("你好！我是你的助手。说“帮助”看看我现在能做什么。" if language == "zh"
                     else "Hello! I'm your assistant. Say “help” to see what I can do right now.")
        elif match.intent == "thanks":
            reply = "不客气！" if language == "zh" else "You're welcome!"
        elif match.intent == "help":
            reply = await self.help_for(language, user_id=user_id, session_id=session_id)
        else:
            assert match.tool is not None, f"intent {match.intent!r} matched without its tool"  # see best_match
            reply = await self._use_tool(match.tool, text, language, user_id, session_id, emit)
        await emit({"type": "delta", "content": reply})
        return reply, "stop"

    async def _use_tool(self, tool: Tool, text: str, language: str, user_id: str,
                        session_id: str | None, emit: Emit) -> str:
        arguments = await asyncio.to_thread(tool.parse_arguments, text) if tool.parse_arguments else {}
        missing = [key for key in tool.parameters.get("required", ()) if key not in arguments]
        if missing:  # the person's words, not the parameters' names
            examples = tool.help.get(language) or tool.examples.get(language) or tool.help.get("en") or [""]
            return _words(NEED_MORE, language).format(example=examples[0])
        if self.confirmations is not None:
            held = await self.confirmations.intercept(tool.name, arguments, user_id=user_id, session_id=session_id,
                                                      language=language, model=AGENT_MODEL, emit=emit)
            if held is not None:
                return held.for_person
        outcome = await self.runner.run(tool.name, arguments, user_id=user_id, session_id=session_id,
                                        model=AGENT_MODEL, emit=emit, language=language)
        if not outcome.ok:  # the error is written for a model; it is in the call's record
            return _words(COULD_NOT, language)
        if tool.summarize:
            return tool.summarize(outcome.result, language)
        return str(outcome.result)
