import type Database from "better-sqlite3";
import { closeSync, fdatasyncSync, fstatSync, ftruncateSync, openSync, statfsSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";

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
 * or another, can be appending frames there, restarting the log or truncating it meanwhile (each
 * of those needs the write lock; removing the WAL at the last close needs an exclusive lock on the
 * database, which this connection's shared lock keeps off). SQLite never trusts a frame by its
 * position: recovery accepts a frame only if its page number is not 0, its salts match the WAL
 * header's and its checksum chain holds, and stops at the first that fails. A zero frame has page
 * number 0 (and the stale frames a restarted WAL leaves behind have old salts); a WAL whose header
 * is zeros is an empty WAL. The zeros are fdatasynced before the lock is let go, so the file's new
 * length is on disk before any commit's fsync counts on it. (This build of SQLite syncs with
 * fsync, not fdatasync: a commit's fsync may still carry an inode's timestamp now and then.)
 *
 * Failure semantics: best effort, never a reason not to open. A WAL already long enough costs one
 * stat and no lock. The write lock held by another process past busy_timeout, no WAL file, less
 * free disk than twice what would be written, or an I/O error while writing (ENOSPC): the store
 * opens as it would have without this, and commits grow the WAL. Zeros written before an error
 * are truncated away again. It takes SQLite's write lock for the time it writes (~10 ms here).
 */
export function presizeWal(db: Database.Database): void {
  if (String(db.pragma("journal_mode", { simple: true })).toLowerCase() !== "wal") return;
  // The file SQLite itself opened (its full path), not one worked out again from the caller's
  // path: a relative path after a chdir, or a file renamed since, would name another database's
  // WAL, whose write lock this connection does not hold.
  const main = (db.pragma("database_list") as { name: string; file: string }[]).find((entry) => entry.name === "main");
  if (main === undefined || main.file === "") return; // in memory or temporary: no WAL file
  const walPath = `${main.file}-wal`;
  const autocheckpoint = Number(db.pragma("wal_autocheckpoint", { simple: true }));
  if (!(autocheckpoint > 0)) return;
  const pageSize = Number(db.pragma("page_size", { simple: true }));
  const target = WAL_HEADER_BYTES + Math.ceil(autocheckpoint * HEADROOM) * (pageSize + FRAME_HEADER_BYTES);
  // Looked at without the lock first: a WAL already that long (another store or process wrote it
  // out) costs no write lock. Looked at again under it, since it may change until then.
  if (sizeOf(walPath) >= target) return;
  try {
    db.exec("BEGIN IMMEDIATE");
  } catch {
    return; // another process held the write lock past busy_timeout: open without it
  }
  try {
    writeOutLocked(walPath, target);
  } finally {
    if (db.inTransaction) db.exec("ROLLBACK"); // nothing was written through SQLite
  }
}

/** Inside the write lock: zeros from the WAL's end to `target`, or nothing; never a thrown I/O error. */
function writeOutLocked(walPath: string, target: number): void {
  let fd: number;
  try {
    fd = openSync(walPath, "r+");
  } catch (error) {
    if (isIoError(error)) return; // no WAL file (yet): nothing to write out
    throw error;
  }
  const start = fstatSync(fd).size;
  try {
    if (start >= target) return;
    // A speed-up never takes the last of the disk: written only when as much stays free after it.
    const disk = statfsSync(dirname(walPath));
    if (disk.bavail * disk.bsize < 2 * (target - start)) return;
    let at = start;
    while (at < target) at += writeSync(fd, ZEROS, 0, Math.min(ZEROS.length, target - at), at);
    fdatasyncSync(fd);
  } catch (error) {
    if (!isIoError(error)) throw error;
    // The zeros written so far are harmless, but they are disk a full one needs: given back. Safe
    // under the write lock, as the writing was: nothing past `start` is a frame.
    try {
      ftruncateSync(fd, start);
    } catch {
      // Left as they are: still never read as frames.
    }
  } finally {
    closeSync(fd);
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch (error) {
    if (isIoError(error)) return -1;
    throw error;
  }
}

/** An error from the file system (ENOENT, ENOSPC, EIO, ...), as against a fault in this code. */
function isIoError(error: unknown): boolean {
  return error instanceof Error && typeof (error as NodeJS.ErrnoException).code === "string";
}
