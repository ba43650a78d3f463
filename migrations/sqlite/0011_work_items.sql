-- A queue item is a typed work item (issue 25): `work::WorkItem` as JSON,
-- with every setting resolved where it was queued (flags, their
-- environment variables, the spec's defaults), instead of the queueing
-- command's arguments, which lost whatever was given by environment.
--
-- An item queued before this is a JSON array of arguments. It is not
-- translated: its settings given by environment are lost for good, so no
-- item could be built from it that says what was asked. The open ones are
-- failed here, saying why; finished ones keep their arguments, for
-- `assay queue` to list. An older assay cannot open this schema (it is
-- newer), so none queues another.
ALTER TABLE work_items RENAME COLUMN args TO item;
UPDATE work_items
   SET state = 'failed',
       failure = 'queued as a command line by an older assay, which may have lost settings given by environment: queue it again (a batch it began resumes with assay run --resume BATCH)',
       finished_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       lease_until_ms = NULL
 WHERE state IN ('queued', 'running');
