import type Database from "better-sqlite3";
import { closeSync, fdatasyncSync, fstatSync, openSync, realpathSync, writeSync } from "node:fs";

/** WAL frames written ahead, as a share of the autocheckpoint interval (a commit may end past it). */
const HEADROOM = 1.25;
const WAL_HEADER_BYTES = 32;
const FRAME_HEADER_BYTES = 24;
const ZEROS = Buffer.alloc(1 << 20);

/**
 * Writes the SQLite WAL file out to its working size with zeros when a store opens, as PostgreSQL
 * zero-fills a WAL segment before using it (`wal_init_zero`), so that fsync'd commits write into
 * blocks the file already has instead of growing it.
 *
 * Why: a commit that appends to the WAL changes the file's size, so its fsync must also commit the
 * file system's metadata (on ext4, a journal commit). Measured here (tools/bench/wal-growth.ts:
 * fsync'd commits of a few pages, p50), 289–297 µs into a growing WAL against 164–173 µs into one
 * written out. SQLite writes the WAL from its start again after a checkpoint and never shortens
 * it (journal_size_limit is -1), so a long-lived database pays this only while its WAL first
 * grows — but SQLite deletes the WAL when the last connection closes, so every process that opens
 * the file starts with an empty one, and its first ~1,000 pages of commits (the autocheckpoint
 * interval) all append: an agent's 50-turn conversation (~800 pages) never leaves that state.
 *
 * Target: `wal_autocheckpoint` × (page size + frame header) × 1.25, ~5 MiB by default; nothing
 * when autocheckpoint is off (the WAL has no working size) or the file is that long already.
 *
 * Why it is safe: the zeros go only past the file's current end, and only while this connection
 * holds SQLite's WAL write lock (inside BEGIN IMMEDIATE), so no other connection, in this process
 * or another, can be appending frames there, restarting the log or truncating it meanwhile.
 * SQLite never trusts a frame by its position: a frame counts only if its salts match the WAL
 * header's and its checksum chain holds, and recovery stops at the first that does not. A zero
 * frame never does (the same holds for the stale frames a restarted WAL leaves behind it), and a
 * WAL whose header is zeros is an empty WAL. The zeros are fdatasynced before the lock is let go,
 * so the file's new length is on disk before any commit's fsync counts on it.
 *
 * Failure semantics: best effort. A failure to write ahead (a full disk, a WAL file SQLite has not
 * made) leaves what was written (zeros past the end, harmless as above) and opens the store
 * anyway; commits then grow the WAL as they would have.
 */
export function presizeWal(db: Database.Database, path: string): void {
  const autocheckpoint = Number(db.pragma("wal_autocheckpoint", { simple: true }));
  if (!(autocheckpoint > 0)) return;
  const pageSize = Number(db.pragma("page_size", { simple: true }));
  const target = WAL_HEADER_BYTES + Math.ceil(autocheckpoint * HEADROOM) * (pageSize + FRAME_HEADER_BYTES);
  db.exec("BEGIN IMMEDIATE");
  try {
    const fd = openSync(`${realpathSync(path)}-wal`, "r+");
    try {
      let at = fstatSync(fd).size;
      if (at >= target) return;
      while (at < target) at += writeSync(fd, ZEROS, 0, Math.min(ZEROS.length, target - at), at);
      fdatasyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Best effort (see above): the store works without it.
  } finally {
    db.exec("COMMIT");
  }
}
