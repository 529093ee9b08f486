"""A session's title before anyone gives one: the default in its person's language, then the
words of its first message (docs/sessions.md, "Default titles")."""
from __future__ import annotations

# A session created without a title is named in its person's language (docs/sessions.md, "Default
# titles"); the spec's 新对话 when the language is unknown. Each of these counts as "no title yet":
# the first message's words replace it.
DEFAULT_TITLES = {"zh": "新对话", "en": "New chat"}
DEFAULT_TITLE = DEFAULT_TITLES["zh"]
DEFAULT_TITLES_SQL = ", ".join(f"'{title}'" for title in DEFAULT_TITLES.values())
TITLE_CHARS = 60


def default_title(language: str | None) -> str:
    """The title of a session created without one: in `language` (a code such as "en" or
    "zh-CN", or an Accept-Language header's value, its preferences in order), the first it names
    that there is a title for; else the spec's 新对话."""
    ranked = []
    for position, part in enumerate((language or "").split(",")):
        tag, _, parameters = part.partition(";")
        weight = 1.0
        for parameter in parameters.split(";"):
            name, _, value = parameter.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        primary = tag.strip().split("-")[0].split("_")[0].lower()
        if primary in DEFAULT_TITLES and weight > 0:
            ranked.append((-weight, position, primary))
    return DEFAULT_TITLES[min(ranked)[2]] if ranked else DEFAULT_TITLE


def title_from(text: str | None) -> str | None:
    """A session's title from its first message, until one is given (a rename, or a better one
    the assistant makes): its first line of words, cut at a word near TITLE_CHARS. None for a
    message with no words (an image alone), which leaves the title for the next."""
    line = next((" ".join(line.split()) for line in (text or "").splitlines() if line.strip()), "")
    if not line:
        return None
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS]
    space = cut.rfind(" ")
    return (cut[:space] if space > TITLE_CHARS // 2 else cut).rstrip(" ,.;:!?，。；：！？") + "…"
