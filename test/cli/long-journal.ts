import Database from "better-sqlite3";
import pg from "pg";
import type { Backend } from "../backends.js";

/**
 * Grows run `runId`'s journal (one step at seq 0, as a one-step workflow leaves it) to `steps`
 * entries with one statement: the engine would take minutes to write 140,000.
 */
export async function growJournal(backend: Backend, database: string, runId: string, steps: number): Promise<void> {
  const insert = `INSERT INTO cairn_steps (run_id, seq, name, kind, status, output, started_at, finished_at, attempts)
    SELECT '${runId}', n, 'step ' || n, 'step', 'succeeded', '{"v":' || n || '}', 1000, 1001, 1 FROM series WHERE n > 0`;
  if (backend.name === "sqlite") {
    const db = new Database(database);
    db.exec(`WITH RECURSIVE series(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM series WHERE n < ${steps - 1}) ${insert}`);
    db.close();
  } else {
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    await client.query(`WITH series(n) AS (SELECT generate_series(1, ${steps - 1})) ${insert}`);
    await client.end();
  }
}
