-- PostgreSQL twin of migrations/sqlite/0007_cached_tokens.sql: same tables, columns and
-- checks (store::tests compares the two schemas).
-- Cached prompt tokens (issue 15): the prompt tokens a server took from its
-- cache instead of evaluating them (`usage.prompt_tokens_details.
-- cached_tokens`, llama.cpp's `timings.cache_n`). They explain the spread of
-- TTFT between requests with one prompt. NULL: the server did not say.
ALTER TABLE replies ADD COLUMN cached_prompt_tokens BIGINT;
