-- 0008: console sign-ins that were signed out. A console cookie is signed,
-- not stored; its id is recorded here when its user signs out, until it
-- would have expired (old rows are deleted as the list is read).
CREATE TABLE revoked_credentials (
  id            TEXT PRIMARY KEY,
  tenant        TEXT NOT NULL,
  expires_at_ms INTEGER NOT NULL
);
CREATE INDEX revoked_credentials_by_expiry ON revoked_credentials (expires_at_ms);
