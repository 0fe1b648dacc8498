-- 0005: console sign-ins that were signed out, as SQLite's 0008. A console
-- cookie is signed, not stored; its id is recorded here when its user signs
-- out, until it would have expired (old rows are deleted as the list is
-- read), so that every instance sharing the database refuses a copy.
CREATE TABLE revoked_credentials (
  id            text PRIMARY KEY,
  tenant        text NOT NULL,
  expires_at_ms bigint NOT NULL
);
CREATE INDEX revoked_credentials_by_expiry ON revoked_credentials (expires_at_ms);
