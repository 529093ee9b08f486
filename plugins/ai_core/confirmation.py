"""The assistant asks before it opens a door. A model can be told to call a tool by text it only
read (a knowledge document, a web page, a memory, a chat-platform message), so a call with an
effect that is physical or hard to undo does not run when it is asked for: it waits, stored in
the database with its session, person and expiry (a "yes" may reach another instance of the AI
core), and the person is shown a `system_info` with `action` `confirm` and the exact effect in
their words. Their next message in that session decides: a plain yes ("yes", "ok", "确认",
"是"...) runs the call once and says how it went; anything else cancels it (docs/ai-core.md,
"Confirmation").

Which calls wait: those whose tool declares an effect (`Tool.effects`) of a kind listed in
`[plugins.ai_core] confirm_effects`, and every call of a tool listed in `confirm_tools`. The AI
core knows no device: the tools name the kinds ("lock.unlock")."""
from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from gateway.context import Context

from . import store
from .contract import SystemInfoEvent
from .settings import AiCoreSettings
from .tools import Emit, Tool, ToolCallContext, ToolRegistry, ToolRunner, decode_arguments, phrase

log = logging.getLogger("plugins.ai_core.confirmation")

# A whole message that says yes, or no (compared without case, spaces at the ends and punctuation).
YES = {"yes", "y", "yeah", "yep", "yes please", "ok", "okay", "sure", "confirm", "confirmed", "do it", "go ahead",
       "确认", "确定", "是", "是的", "好", "好的", "可以", "对", "执行", "同意"}
NO = {"no", "n", "nope", "cancel", "stop", "don't", "do not", "no thanks",
      "不", "不要", "不用", "否", "取消", "算了", "别"}

ASK = {"en": "{effect}? This needs your confirmation: say “yes” to go ahead; anything else cancels it.",
       "zh": "{effect}？这需要你确认：回复“确认”就执行，回复其他内容则取消。"}
CANCELLED = {"en": "OK, cancelled. Not done: {effect}.", "zh": "好的，已取消，没有执行：{effect}。"}
CANCELLED_BY_MESSAGE = {"en": "Cancelled, not done: {effect}.", "zh": "已取消，没有执行：{effect}。"}
EXPIRED = {"en": "That request has expired, so nothing was done: {effect}. Ask again if you still want it.",
           "zh": "这个请求已过期，没有执行：{effect}。如果还需要，请再说一次。"}
DID = {"en": "Done: {effect}.", "zh": "已完成：{effect}。"}
FAILED = {"en": "That did not work: {effect}.", "zh": "没有成功：{effect}。"}
FOR_MODEL = ("Not done yet: this action waits for the user's confirmation in the conversation (they were "
             "shown what it would do). Tell the user in one sentence what it would do and that it runs only "
             "if they answer yes; do not call it again.")
ONE_AT_A_TIME = ("Not done: another action of this turn already waits for the user's confirmation; ask "
                 "for this one after the user has answered.")
NO_CONVERSATION = ("Not done: this action needs the user's confirmation, which can only be given in the "
                   "assistant's own chat conversation; tell the user to ask for it there.")
NOT_HELD = "Not done: the user's confirmation could not be asked for right now; tell them to try again later."
NOT_HELD_WORDS = {"en": "Not done: {effect} needs your confirmation, and I can't ask for it right now. Try again "
                        "in a moment.",
                  "zh": "没有执行：{effect}需要你确认，但现在无法发起确认，请稍后再试。"}
NO_CONVERSATION_WORDS = {"en": "Not done: {effect} needs your confirmation, which I can only ask for in a chat "
                               "conversation.",
                         "zh": "没有执行：{effect}需要你确认，只能在聊天对话里确认。"}


def answer_of(text: str) -> str | None:
    """`yes`, `no`, or None for a message that is neither on its own."""
    said = unicodedata.normalize("NFKC", text).lower().replace("’", "'")
    said = " ".join(re.sub(r"[^\w\s']+", " ", said).split())
    if said in YES:
        return "yes"
    if said in NO:
        return "no"
    return None


@dataclass(frozen=True)
class Hold:
    """A call that must wait: the kinds of its effects and what it would do, in the person's words."""
    kinds: list[str]
    effect: str


@dataclass(frozen=True)
class Pending:
    id: str
    user_id: str
    session_id: str
    tool_name: str
    arguments: dict
    effect: str
    language: str
    model: str | None
    expired: bool


@dataclass(frozen=True)
class Held:
    """The answer to a call that did not run: the tool result a model reads, and what a person reads."""
    for_model: dict
    for_person: str


class Confirmations:
    """The rules (which calls wait) and the pending calls (ai_pending_confirmations)."""

    # Seconds a tool's `effects` may take (it usually asks the gateway once).
    EFFECTS_TIMEOUT = 10.0

    def __init__(self, context: Context, registry: ToolRegistry, runner: ToolRunner, settings: AiCoreSettings) -> None:
        self.context = context
        self.registry = registry
        self.runner = runner
        self.effect_kinds = set(settings.confirm_effects)
        self.tool_names = set(settings.confirm_tools)
        self.ttl = float(settings.confirm_seconds)

    # ------------------------------------------------------------ which calls wait

    async def hold_for(self, tool: Tool, arguments: dict, *, user_id: str, session_id: str | None,
                       language: str) -> Hold | None:
        """What this call would do that waits for the person's yes; None when it may run now."""
        kinds: list[str] = []
        words: list[str] = []
        if tool.effects is not None and (self.effect_kinds or tool.name in self.tool_names):
            call = ToolCallContext(user_id, session_id, tool.name, self.context, None, self.runner.gateway, language)
            try:
                async with asyncio.timeout(min(self.runner.timeout, self.EFFECTS_TIMEOUT)):
                    effects = list(await tool.effects(arguments, call))
            except Exception as error:  # unknown effects: asked, not run blind
                log.warning("the effects of a call of %s could not be told (%r): it waits for a yes", tool.name, error)
                return Hold([f"tool.{tool.name}"], self.plain_words(tool, arguments, language))
            for effect in effects:
                if effect.kind in self.effect_kinds:
                    kinds.append(effect.kind)
                    words.append(phrase(effect.words, language))
        if not kinds and tool.name in self.tool_names:
            return Hold([f"tool.{tool.name}"], self.plain_words(tool, arguments, language))
        if not kinds:
            return None
        return Hold(kinds, ("；" if language == "zh" else "; ").join(dict.fromkeys(words)))

    @staticmethod
    def plain_words(tool: Tool, arguments: dict, language: str) -> str:
        """A tool's own progress words as the effect, when it says none ("Turning on the light")."""
        return tool.progress_words(arguments, language).rstrip("…. ")

    async def intercept(self, name: str, raw_arguments: str | dict, *, user_id: str, session_id: str | None,
                        language: str, model: str | None, emit: Emit, held_already: bool = False) -> Held | None:
        """None when the call may run now. Otherwise it did not run, and now waits for the
        person (the `confirm` notice was emitted) or cannot wait (no conversation, or another
        call of the turn waits)."""
        tool = self.registry.get(name)
        arguments, problem = decode_arguments(raw_arguments)
        if tool is None or problem:
            return None  # the runner says what is wrong
        hold = await self.hold_for(tool, arguments, user_id=user_id, session_id=session_id, language=language)
        if hold is None:
            return None
        if not session_id:
            return Held({"status": "not_run", "effect": hold.effect, "message": NO_CONVERSATION},
                        phrase(NO_CONVERSATION_WORDS, language).format(effect=hold.effect))
        if held_already:
            return Held({"status": "not_run", "effect": hold.effect, "message": ONE_AT_A_TIME}, ONE_AT_A_TIME)
        try:
            notice = await self.ask(tool.name, arguments, hold, user_id=user_id, session_id=session_id,
                                    language=language, model=model)
        except Exception as error:  # the database is away: not asked, so not run
            log.warning("a call of %s could not be held for confirmation: %r", tool.name, error)
            return Held({"status": "not_run", "effect": hold.effect, "message": NOT_HELD},
                        phrase(NOT_HELD_WORDS, language).format(effect=hold.effect))
        await emit(notice)
        return Held({"status": "awaiting_confirmation", "effect": hold.effect, "message": FOR_MODEL},
                    notice["message"])

    # ------------------------------------------------------------ the pending calls

    async def ask(self, tool_name: str, arguments: dict, hold: Hold, *, user_id: str, session_id: str,
                  language: str, model: str | None) -> SystemInfoEvent:
        """Store the call as the session's one pending confirmation (an older one lapses) and
        return the notice that asks the person."""
        confirmation_id = "cf_" + secrets.token_hex(12)
        expires = datetime.now(timezone.utc) + timedelta(seconds=self.ttl)
        await store.supersede_confirmations(self.context.db, user_id, session_id)
        await store.insert_confirmation(self.context.db, confirmation_id, user_id, session_id, tool_name,
                                        json.dumps(arguments, ensure_ascii=False), hold.kinds, hold.effect,
                                        language, model, expires)
        return {"type": "system_info", "level": "warning", "action": "confirm",
                "message": phrase(ASK, language).format(effect=hold.effect), "effect": hold.effect,
                "confirmation_id": confirmation_id, "expires_at": expires.isoformat(timespec="seconds")}

    async def pending(self, user_id: str, session_id: str) -> Pending | None:
        row = await store.pending_confirmation(self.context.db, user_id, session_id)
        return Pending(**row) if row else None

    async def decide(self, pending: Pending, status: str) -> bool:
        """Move the call from `pending` to `status`, once: False when it was decided already (or,
        to be confirmed, has expired meanwhile)."""
        changed = await store.decide_confirmation(self.context.db, pending.id, status,
                                                  unexpired_only=status == "confirmed")
        return changed == 1

    async def answer(self, text: str, *, user_id: str, session_id: str, emit: Emit) -> tuple[str, str | None] | None:
        """The person's message, read as the answer to the session's pending call, if one waits:
        (the reply, the model the call was for) when the message was the answer; None when the
        turn goes on as usual (no call waited, or the message cancelled it and says more)."""
        try:
            pending = await self.pending(user_id, session_id)
        except Exception as error:  # the database is away: nothing can be confirmed, the turn goes on
            log.warning("the pending confirmation of session %s could not be read: %r", session_id, error)
            return None
        if pending is None:
            return None
        said = answer_of(text)
        language = pending.language
        if pending.expired:
            await self.decide(pending, "expired")
            if said != "yes":
                return None
            return phrase(EXPIRED, language).format(effect=pending.effect), pending.model
        if said == "yes":
            if not await self.decide(pending, "confirmed"):
                return phrase(EXPIRED, language).format(effect=pending.effect), pending.model
            return await self._run(pending, emit), pending.model
        await self.decide(pending, "cancelled")
        if said == "no":
            return phrase(CANCELLED, language).format(effect=pending.effect), pending.model
        await emit({"type": "system_info", "level": "info", "action": "",
                    "message": phrase(CANCELLED_BY_MESSAGE, language).format(effect=pending.effect)})
        return None

    async def _run(self, pending: Pending, emit: Emit) -> str:
        """The confirmed call, run once; what the person is told of it."""
        tool = self.registry.get(pending.tool_name)
        outcome = await self.runner.run(pending.tool_name, pending.arguments, user_id=pending.user_id,
                                        session_id=pending.session_id, model=pending.model, emit=emit,
                                        language=pending.language)
        if not outcome.ok:
            return phrase(FAILED, pending.language).format(effect=pending.effect)
        if tool is not None and tool.summarize is not None:
            try:
                return tool.summarize(outcome.result, pending.language)
            except Exception:  # a plugin's wording must not lose the news that it was done
                log.exception("summarizing a confirmed call of %s failed", pending.tool_name)
        return phrase(DID, pending.language).format(effect=pending.effect)
