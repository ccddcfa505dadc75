-- trace.sql: the SQLite schema of one process's dpro trace (see dprotrace.h).
-- The writer creates it; readers check meta.schema_major before anything else.
-- The page size is set by the writer before this runs (dpro_writer_options.page_size,
-- 1024 by default; 512 for imported traces, where the fixed tables dominate small files).
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;

-- Key/value facts about the process and the recording (keys: dprotrace.h).
CREATE TABLE IF NOT EXISTS meta (
  key   TEXT PRIMARY KEY NOT NULL,
  value TEXT
) WITHOUT ROWID;

-- Interned strings (kernel names, API names, NVTX text, stack frames), in blocks: each
-- row holds ids first_id .. first_id+count-1 as zlib(NUL-terminated texts, in id order).
-- C++ kernel names repeat most of their text, so a block compresses several times.
CREATE TABLE IF NOT EXISTS string_blocks (
  first_id INTEGER PRIMARY KEY,
  count    INTEGER NOT NULL,
  raw_size INTEGER NOT NULL,
  data     BLOB NOT NULL
);

-- Event batches: zlib(protobuf dpro.Batch); the plain columns let readers seek.
CREATE TABLE IF NOT EXISTS batches (
  id       INTEGER PRIMARY KEY,
  first_ns INTEGER NOT NULL,
  last_ns  INTEGER NOT NULL,
  count    INTEGER NOT NULL,
  raw_size INTEGER NOT NULL,
  data     BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS batches_by_time ON batches(first_ns);

-- The tables below are created by the writer when their first row comes: an empty table
-- would still cost a page (and its line in sqlite_schema). Readers take a missing one as
-- empty. Each statement must stay a single "CREATE TABLE IF NOT EXISTS name (" statement.
-- @on-first-use

CREATE TABLE IF NOT EXISTS devices (
  id           INTEGER PRIMARY KEY,
  name         TEXT,
  sm_count     INTEGER,
  total_memory INTEGER,
  clock_khz    INTEGER,
  cc_major     INTEGER,
  cc_minor     INTEGER
);

CREATE TABLE IF NOT EXISTS threads (
  tid  INTEGER PRIMARY KEY,
  name TEXT
);

CREATE TABLE IF NOT EXISTS streams (
  id       INTEGER PRIMARY KEY,
  device   INTEGER,
  flags    INTEGER,
  priority INTEGER,
  name     TEXT
);

-- NCCL communicators as this process saw them; hash is the same on every rank.
CREATE TABLE IF NOT EXISTS communicators (
  handle      INTEGER PRIMARY KEY,
  hash        INTEGER NOT NULL,
  parent_hash INTEGER,
  rank        INTEGER,
  size        INTEGER,
  device      INTEGER
);

-- Call stacks: frames are string ids, innermost first, as a comma-separated list.
CREATE TABLE IF NOT EXISTS stacks (
  id     INTEGER PRIMARY KEY,
  frames TEXT NOT NULL
);

-- Events the collector had to drop (full buffers), by thread and reason.
CREATE TABLE IF NOT EXISTS drops (
  thread INTEGER NOT NULL,
  reason TEXT NOT NULL,
  count  INTEGER NOT NULL,
  PRIMARY KEY (thread, reason)
) WITHOUT ROWID;
