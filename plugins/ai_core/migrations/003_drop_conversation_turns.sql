-- The gateway keeps every conversation; the search_messages tool asks the gateway's message
-- search instead of this second copy.
DROP TABLE IF EXISTS ai_conversation_turns;
