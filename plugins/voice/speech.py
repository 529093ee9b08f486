"""A streamed reply cut into sentences to speak, as it arrives.

`SentenceCutter.feed(piece)` returns the sentences completed by that piece, ready to read
aloud; `flush()` the rest at the end. A sentence ends at `.`, `!`, `?` (followed by a space or
the end of the reply), at Chinese `。！？；…` (at once), and at a line break. Never inside a
number ("3.14", "1,000.5"), after a list number ("1. "), after a common abbreviation ("e.g.",
"Dr."), or inside a fenced code block (``` or ~~~): a code block is not read at all, nor is
`<action>...</action>` narration (chat's review shows it as an action, not speech). Markdown is read as
words, not symbols: emphasis, headings, list markers, inline code quotes, links (their text),
images (their alt text), table bars and tags are taken away (`speakable`)."""
from __future__ import annotations

import re

FENCE = "```"
FENCES = ("```", "~~~")
ACTION_OPEN, ACTION_CLOSE = "<action>", "</action>"
CJK_ENDS = "。！？；…"
LATIN_ENDS = ".!?"
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "prof", "st", "vs", "etc", "e.g", "i.e", "no", "fig", "approx"}

_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9_\-]*(?:\s[^<>]*)?/?>")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+", re.MULTILINE)
_QUOTE = re.compile(r"^\s*>+\s?", re.MULTILINE)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+", re.MULTILINE)
_RULE = re.compile(r"^\s*(?:[-*_=]\s*){3,}$", re.MULTILINE)
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|~~)(?=\S)(.+?)(?<=\S)\1")
_SYMBOLS = re.compile(r"[`*#|~^]+|(?<!\w)_+|_+(?!\w)")
_QUOTES = re.compile(r"[“”「」『』\"]")  # read as the tone of voice, not said
_SPACES = re.compile(r"\s+")
_SPEAKABLE = re.compile(r"\w", re.UNICODE)


def speakable(text: str) -> str:
    """`text` as it should be read aloud: markdown's symbols taken away, spaces collapsed; ""
    when nothing is left to say (a rule, a lone bullet)."""
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _TAG.sub(" ", text)
    text = _RULE.sub(" ", text)
    text = _HEADING.sub("", text)
    text = _QUOTE.sub("", text)
    text = _BULLET.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _SYMBOLS.sub(" ", text)
    text = _QUOTES.sub("", text)
    text = _SPACES.sub(" ", text).strip()
    return text if _SPEAKABLE.search(text) else ""


class SentenceCutter:
    def __init__(self, max_chars: int = 300):
        self.max_chars = max_chars
        self._pending = ""  # text not yet cut
        self._closer: str | None = None  # inside a code block or an action: what ends it
        self._line_start = True  # whether _pending begins a line (a fence opens only there)

    def feed(self, piece: str) -> list[str]:
        self._pending += piece
        return self._cut(final=False)

    def flush(self) -> list[str]:
        sentences = self._cut(final=True)
        rest, self._pending = self._pending, ""
        if self._closer is None:
            sentences += _spoken(rest)
        self._closer = None
        return sentences

    # ------------------------------------------------------------------ cutting

    def _cut(self, final: bool) -> list[str]:
        out: list[str] = []
        while True:
            if self._closer is not None:  # skipping: a code block or an action is not read
                closer = self._closer
                close = self._pending.lower().find(closer)
                if close < 0:  # it goes on: keep only what may start its closing marker
                    self._pending = self._pending[-(len(closer) - 1):] if not final else ""
                    return out
                if closer == ACTION_CLOSE:
                    self._pending = self._pending[close + len(closer):]
                    self._closer, self._line_start = None, False
                    continue
                line_end = self._pending.find("\n", close)
                if line_end < 0 and not final:
                    self._pending = self._pending[close:]  # the fence's line is not over
                    return out
                self._pending = "" if line_end < 0 else self._pending[line_end + 1:]
                self._closer, self._line_start = None, True
                continue
            boundary = self._boundary(final)
            if boundary is None:
                if len(self._pending) > self.max_chars:  # no end in sight: cut at a pause
                    cut = _pause(self._pending, self.max_chars)
                    out += _spoken(self._pending[:cut])
                    self._pending = self._pending[cut:]
                    self._line_start = False
                    continue
                return out
            end, opener = boundary
            out += _spoken(self._pending[:end])
            rest = self._pending[end:]
            if opener is not None:
                # An opening fence's line (its language) is inside the block.
                self._pending = rest[len(opener):]
                self._closer = ACTION_CLOSE if opener == ACTION_OPEN else opener
                continue
            self._line_start = self._pending[end - 1:end] == "\n"
            self._pending = rest
            if not self._pending:
                return out

    def _boundary(self, final: bool) -> tuple[int, str | None] | None:
        """(where the first sentence of `_pending` ends, the marker of a code block or action
        that starts there, if one does)."""
        text = self._pending
        for index, char in enumerate(text):
            if char in "`~" and (index == 0 and self._line_start or text[index - 1:index] == "\n"):
                for fence in FENCES:
                    if text.startswith(fence, index):
                        return index, fence
                    if not final and fence.startswith(text[index:]):
                        return None  # maybe a fence: wait for more
            if char == "<":
                head = text[index:index + len(ACTION_OPEN)].lower()
                if head == ACTION_OPEN:
                    return index, ACTION_OPEN
                if not final and ACTION_OPEN.startswith(head):
                    return None  # maybe an action: wait for more
            if char == "\n":
                return index + 1, None
            if char in CJK_ENDS:
                end = index + 1
                while end < len(text) and text[end] in CJK_ENDS + "”」』）)\"'":
                    end += 1
                return end, None
            if char in LATIN_ENDS:
                end = index + 1
                while end < len(text) and text[end] in LATIN_ENDS + "\"')]”’":
                    end += 1
                if end == len(text):
                    if final:
                        return end, None
                    return None  # the next character decides ("3." may become "3.14")
                if not text[end].isspace():
                    continue  # "3.14", "example.com", "a.b"
                if char == "." and not _ends_sentence(text, index):
                    continue
                return end, None
        return None


def _ends_sentence(text: str, dot: int) -> bool:
    """Whether the "." at `dot` (followed by a space) ends a sentence: not after a list number
    at the start of a line, nor after an abbreviation."""
    line_start = text.rfind("\n", 0, dot) + 1
    word = text[line_start:dot].rsplit(None, 1)[-1] if text[line_start:dot].strip() else ""
    if word.isdigit() and text[line_start:dot].strip() == word:
        return False  # "1. Buy milk"
    return word.lower().lstrip("(\"'") not in ABBREVIATIONS


def _pause(text: str, limit: int) -> int:
    """Where to cut a long run without a sentence end: after the last comma or space before
    `limit`, else at it."""
    for marks in ("，、,;:：", " "):
        cut = max(text.rfind(mark, 0, limit) for mark in marks)
        if cut > limit // 3:
            return cut + 1
    return limit


def _spoken(text: str) -> list[str]:
    # A closing quote that came after the sentence was given belongs to it, and is not said.
    cleaned = speakable(text.lstrip("”」』）)’\"' \t"))
    return [cleaned] if cleaned else []
