"""What the thinking job hands the model and how it reads the answer: the newest messages kept
when the text is too long, the memories listed, a JSON answer or plain text taken."""
from __future__ import annotations

from plugins.memory.thinking import INSTRUCTIONS, MAX_THOUGHT_CHARS, Material, parse_thought


def test_the_answer_is_read_as_json_or_as_plain_text():
    assert parse_thought('{"noticed": "Lena visits.", "suggestion": "Plan a dinner."}').noticed == "Lena visits."
    fenced = parse_thought('```json\n{"noticed": "她喜欢爬山。", "suggestion": ""}\n```')
    assert (fenced.noticed, fenced.suggestion) == ("她喜欢爬山。", "")
    assert parse_thought('{"noticed": "", "suggestion": ""}').noticed == ""
    plain = parse_thought("  Alice seems stressed about work.  ")
    assert (plain.noticed, plain.suggestion) == ("Alice seems stressed about work.", "")
    assert len(parse_thought("x" * 10000).noticed) == MAX_THOUGHT_CHARS


def test_the_prompt_keeps_the_newest_messages_within_its_bound():
    messages = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n:03d} " + "." * 80}
                for n in range(100)]
    material = Material(sessions=[{"id": "s1", "title": "Dinner", "messages": messages}],
                        memories=[{"id": "m1", "category": "relationship", "content": "My sister is called Lena."}])
    prompt = material.render(3000)
    assert len(prompt) <= 3000 + 200 and prompt.endswith(INSTRUCTIONS)
    assert "- [relationship] My sister is called Lena." in prompt and "Conversation “Dinner”:" in prompt
    assert "message 099" in prompt and "Person: message 098" in prompt and "message 000" not in prompt
    assert "(nothing yet)" in Material(sessions=material.sessions).render(3000)
