import type Database from "better-sqlite3";
import type { Mutex } from "../mutex.js";
import {
  collectHashes,
  deletableTrees,
  deleteRunRows,
  matchingRuns,
  payloadPage,
  validateDeleteFilter,
  type DeletedRuns,
  type LayerDeletion,
  type RetentionSql,
  type RunDeleteFilter,
} from "../retention.js";
import { positionalPlaceholders } from "../rows.js";
import type { RunStatus } from "../store.js";

/**
 * Retention on SQLite: the runs in one IMMEDIATE transaction, then their payloads in another. SQLite
 * has one writer at a time, and every write that names a payload upserts it in the same
 * transaction, so no hash can gain a reference between the check and the delete.
 */
export async function sqliteDeleteRuns(db: Database.Database, lock: Mutex, filter: RunDeleteFilter, layers: LayerDeletion): Promise<DeletedRuns> {
  validateDeleteFilter(filter);
  const sql = adapter(db);
  const { runIds, skipped, hashes } = await immediate(db, lock, async () => {
    const roots = await matchingRuns(sql, filter);
    const trees = await deletableTrees(sql, roots, async (ids) => {
      const rows = await sql.all<{ id: string; status: RunStatus }>(
        `SELECT id, status FROM cairn_runs WHERE id IN (SELECT value FROM json_each($1))`,
        [JSON.stringify(ids)],
      );
      return new Map(rows.map((r) => [r.id, r.status]));
    });
    return { ...trees, hashes: await deleteRunRows(sql, trees.runIds, layers) };
  });
  const payloads = hashes.length === 0 ? 0 : await immediate(db, lock, () => collectHashes(sql, hashes, layers));
  return { runIds, skipped, payloads };
}

export async function sqliteCollectPayloads(db: Database.Database, lock: Mutex, layers: LayerDeletion): Promise<number> {
  const sql = adapter(db);
  let deleted = 0;
  let after = "";
  for (;;) {
    const page = await payloadPage(sql, after, 2000);
    if (page.length === 0) return deleted;
    deleted += await immediate(db, lock, () => collectHashes(sql, page, layers));
    after = page[page.length - 1]!;
  }
}

function adapter(db: Database.Database): RetentionSql {
  return {
    async all<Row>(text: string, params: unknown[]): Promise<Row[]> {
      const q = positionalPlaceholders(text, params);
      return db.prepare(q.text).all(...q.params) as Row[];
    },
    async run(text: string, params: unknown[]): Promise<number> {
      const q = positionalPlaceholders(text, params);
      return db.prepare(q.text).run(...q.params).changes;
    },
  };
}

/** The store's write lock, then BEGIN IMMEDIATE (the body awaits only this connection's statements). */
function immediate<T>(db: Database.Database, lock: Mutex, body: () => Promise<T>): Promise<T> {
  return lock.run(async () => {
    db.exec("BEGIN IMMEDIATE");
    try {
      const result = await body();
      db.exec("COMMIT");
      return result;
    } catch (error) {
      if (db.inTransaction) db.exec("ROLLBACK");
      throw error;
    }
  });
}
