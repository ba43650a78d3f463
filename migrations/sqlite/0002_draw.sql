-- Draw figures (issue 3). Every reply says how it was drawn: its outcome,
-- the server's own sentence when it failed, chunks, TTFT to content and to
-- reasoning, whether it hit the cap or was cut early. NULL stays "unknown":
-- token counts a server did not send, timings a replay corpus did not record.

-- ok, http_error(STATUS), connection_error, timeout, malformed_chunk,
-- pool_stopped (not sent: the pool refused before). Rows written before this
-- migration were replay rows, hence the default.
ALTER TABLE replies ADD COLUMN outcome TEXT NOT NULL DEFAULT 'ok';
ALTER TABLE replies ADD COLUMN http_status INTEGER;
-- The engine's sentence (error.message, message, detail...) and the raw
-- body as sent (truncated to 4 KiB).
ALTER TABLE replies ADD COLUMN error_message TEXT;
ALTER TABLE replies ADD COLUMN error_body TEXT;
ALTER TABLE replies ADD COLUMN ttft_reasoning_ms REAL;
-- Stream chunks that carried text; tokens per chunk = completion_tokens / chunks.
ALTER TABLE replies ADD COLUMN chunks INTEGER;
ALTER TABLE replies ADD COLUMN hit_cap INTEGER NOT NULL DEFAULT 0 CHECK (hit_cap IN (0, 1));
ALTER TABLE replies ADD COLUMN cut_early INTEGER NOT NULL DEFAULT 0 CHECK (cut_early IN (0, 1));
-- Cut early with usage known: what the cap still allowed (an upper bound on
-- the tokens saved).
ALTER TABLE replies ADD COLUMN cap_tokens_left INTEGER;
-- Attempts made (0 for replay and for requests never sent).
ALTER TABLE replies ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;

-- Every attempt of every request, retries and cancellations included. `idx`
-- is the reply the request became; NULL for a request cancelled when a race
-- had its N replies (it is no reply).
CREATE TABLE draw_attempts (
    id             INTEGER PRIMARY KEY,
    batch_id       INTEGER NOT NULL REFERENCES batches(id),
    idx            INTEGER,
    pool           TEXT NOT NULL,
    attempt        INTEGER NOT NULL CHECK (attempt >= 1),
    -- Since the request's start.
    started_ms     REAL NOT NULL,
    duration_ms    REAL NOT NULL,
    outcome        TEXT NOT NULL,
    http_status    INTEGER,
    error_message  TEXT,
    error_body     TEXT,
    retry_after_ms REAL,
    -- The wait taken before the next attempt (NULL: none followed).
    delay_ms       REAL
);
CREATE INDEX draw_attempts_batch ON draw_attempts (batch_id, idx);
