import type pg from "pg";
import type { PoolClient } from "pg";
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
import type { RunStatus } from "../store.js";

/**
 * Retention on PostgreSQL, in two transactions.
 *
 * 1. The runs: matched with `FOR UPDATE SKIP LOCKED` (executors running retention at once take
 *    different runs; runs named by id are waited for instead), each tree's rows locked in id order, statuses checked under the lock, rows
 *    deleted. A fork locks its origin's row `FOR SHARE`, so a fork and the deletion of its origin
 *    take turns: the fork either copies the journal before the deletion (and its rows then name the
 *    payloads) or finds its origin gone.
 * 2. The payloads the deleted rows named: `LOCK TABLE cairn_payloads IN SHARE ROW EXCLUSIVE MODE`
 *    waits for every transaction that wrote a payload row (each write of a row that names a payload
 *    upserts that payload in the same transaction) and holds new ones off while it checks that no row
 *    names a hash and deletes it. A writer that was waiting then re-inserts the payload it needs.
 *    The lock is held for one short statement per 500 hashes.
 */
export async function postgresDeleteRuns(pool: pg.Pool, filter: RunDeleteFilter, layers: LayerDeletion): Promise<DeletedRuns> {
  validateDeleteFilter(filter);
  const { runIds, skipped, hashes } = await retryingTransaction(pool, async (client) => {
    const sql = adapter(client);
    // Named runs wait for a fork or a cancel in flight; a policy's batch skips runs that are busy.
    const roots = await matchingRuns(sql, filter, filter.ids === undefined ? "FOR UPDATE SKIP LOCKED" : "FOR UPDATE");
    const trees = await deletableTrees(sql, roots, async (ids) => {
      const rows = await client.query<{ id: string; status: RunStatus }>(
        "SELECT id, status FROM cairn_runs WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE",
        [ids],
      );
      return new Map(rows.rows.map((r) => [r.id, r.status]));
    });
    const named = await deleteRunRows(sql, trees.runIds, layers);
    return { ...trees, hashes: named };
  });
  const payloads = hashes.length === 0 ? 0 : await collect(pool, hashes, layers);
  return { runIds, skipped, payloads };
}

export async function postgresCollectPayloads(pool: pg.Pool, layers: LayerDeletion): Promise<number> {
  let deleted = 0;
  let after = "";
  for (;;) {
    const page = await payloadPage(adapter(pool), after, 2000);
    if (page.length === 0) return deleted;
    deleted += await collect(pool, page, layers);
    after = page[page.length - 1]!;
  }
}

function collect(pool: pg.Pool, hashes: string[], layers: LayerDeletion): Promise<number> {
  return retryingTransaction(pool, async (client) => {
    await client.query("LOCK TABLE cairn_payloads IN SHARE ROW EXCLUSIVE MODE");
    return collectHashes(adapter(client), hashes, layers);
  });
}

function adapter(db: pg.Pool | PoolClient): RetentionSql {
  return {
    async all<Row>(text: string, params: unknown[]): Promise<Row[]> {
      return (await db.query(text, params)).rows as Row[];
    },
    async run(text: string, params: unknown[]): Promise<number> {
      return (await db.query(text, params)).rowCount ?? 0;
    },
  };
}

/** Deadlocks (40P01) and serialization failures (40001) simply run again. */
async function retryingTransaction<T>(pool: pg.Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN READ WRITE");
      const result = await fn(client);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch((rollbackError: unknown) => (broken = rollbackError as Error));
      const code = (error as { code?: unknown }).code;
      if (attempt >= 5 || (code !== "40P01" && code !== "40001")) throw error;
    } finally {
      client.release(broken);
    }
  }
}
