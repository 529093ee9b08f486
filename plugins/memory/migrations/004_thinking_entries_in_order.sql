-- The log lists entries in the order they were written: a wall clock stepped back (seen on a
-- virtual machine) must not swap two entries, nor equal timestamps leave their order to chance.
ALTER TABLE thinking_entries ADD COLUMN seq bigserial;
CREATE INDEX thinking_entries_user_seq ON thinking_entries (user_id, seq DESC);
CREATE INDEX thinking_entries_seq ON thinking_entries (seq DESC);
