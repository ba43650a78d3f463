-- Where a batch's replies come from (issue 38): the draw source it was
-- started with, as JSON (`draw::source::DrawSource`): the spec's replay
-- corpus, or the pools file, the split and each HTTP pool's name, share
-- and configuration as the batch used it. Never a key: a pool names the
-- variable that holds its key, and each machine reads its own. A resume
-- draws from this source unless its flags name another; then this column
-- becomes that one. NULL for batches stored before this column, which
-- resume as they always did (from the spec and the flags).
ALTER TABLE batches ADD COLUMN draw TEXT;

-- A resume whose flags named another source than the batch's: the
-- source before (`draw_was`) and the one this attempt drew from
-- (`draw_now`), both as `batches.draw` holds them. NULL for a resume that
-- kept the batch's source.
ALTER TABLE resumes ADD COLUMN draw_was TEXT;
ALTER TABLE resumes ADD COLUMN draw_now TEXT;
