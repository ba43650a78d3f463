-- The queue lanes drain (issue 18). An item is one `assay run` (kind
-- batch) or one part of a stored suite (`assay suite run --resume S --part
-- A..B`, kind suite) to do: its arguments as JSON (a spec made absolute;
-- the lane picks the store, output and work folders). A lane claims an item for a lease measured on
-- the store's clock (epoch ms) and renews it while it works; an item whose
-- lease ran out is claimable again, and `claims` counts the claims, so a
-- lane whose lease was taken over can no longer renew or finish it.
CREATE TABLE work_items (
    id             INTEGER PRIMARY KEY,
    kind           TEXT NOT NULL CHECK (kind IN ('batch', 'suite')),
    args           TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    queued_at      TEXT NOT NULL,
    lane           TEXT,
    lane_host      TEXT,
    lane_boot      TEXT,
    lane_pid       INTEGER,
    lease_until_ms INTEGER,
    claims         INTEGER NOT NULL DEFAULT 0,
    batch_id       INTEGER REFERENCES batches(id),
    failure        TEXT,
    finished_at    TEXT
);
-- Claims walk the open items oldest first; done and failed ones, which
-- pile up, are not in this index, so a claim never scans past them.
CREATE INDEX work_items_open ON work_items (id) WHERE state IN ('queued', 'running');
-- `batches` and `show` look up a running batch's item (its lease).
CREATE INDEX work_items_batch ON work_items (batch_id);

-- The lane a batch ran on, when a lane ran it.
ALTER TABLE batches ADD COLUMN lane TEXT;
