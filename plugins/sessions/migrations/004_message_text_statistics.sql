-- Message search (`content ILIKE %words%`, through the trigram index) is planned from the text's
-- statistics. With the default 100-entry histogram one sampled hit of a rare phrase makes the
-- planner expect 1% of all messages to match and walk the whole history newest-first instead of
-- reading the trigram index (seen on 100,000 messages: a needle of 5 estimated at 1,010 rows).
-- A finer histogram keeps rare phrases rare.
ALTER TABLE chat_messages ALTER COLUMN content SET STATISTICS 1000;
