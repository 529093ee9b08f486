-- The per-user bound on waiting turns (plugins.chat max_queued_turns) counts them by user.
CREATE INDEX chat_turn_queue_user_waiting ON chat_turn_queue (user_id) WHERE status = 'queued';
