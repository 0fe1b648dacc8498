-- 0002: the event log becomes a rowid table.
--
-- Why: in 0001, events was WITHOUT ROWID, so each ~300-byte event sat in an
-- index b-tree, and SQLite rebalances an index b-tree across three sibling
-- pages on nearly every insert that fills a page: a commit of four events
-- wrote three or four event pages (plus the interior page). Appends to a
-- rowid table with a growing key land on its rightmost page, which SQLite
-- splits the cheap way ("quick balance"): usually one event page per commit.
-- The (session_id, seq) key stays unique through the index below.
CREATE TABLE events_new (
  id            INTEGER PRIMARY KEY,
  session_id    TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
  seq           INTEGER NOT NULL,
  type          TEXT NOT NULL,
  turn_id       TEXT NOT NULL DEFAULT '',
  json          TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL
);
-- A session's existing events stay together, in order.
INSERT INTO events_new (session_id, seq, type, turn_id, json, created_at_ms)
  SELECT session_id, seq, type, turn_id, json, created_at_ms FROM events ORDER BY session_id, seq;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE UNIQUE INDEX events_by_session ON events (session_id, seq);
