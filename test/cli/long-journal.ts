import Database from "better-sqlite3";
import pg from "pg";
import type { Cairn } from "../../src/index.js";
import type { Backend } from "../backends.js";

/** A finished run `runId` of a one-step workflow on `cairn` (shut down after), its journal grown to `steps` entries. */
export async function runWithLongJournal(cairn: Cairn, backend: Backend, database: string, runId: string, steps: number): Promise<void> {
  const one = cairn.workflow("one", async (ctx) => ctx.step("first", () => 0));
  await cairn.launch();
  await (await one.start(undefined, { id: runId })).result();
  await cairn.shutdown();
  await growJournal(backend, database, runId, steps);
}

/**
 * Grows run `runId`'s journal (one step at seq 0, as a one-step workflow leaves it) to `steps`
 * entries with one statement: the engine would take minutes to write 140,000.
 */
async function growJournal(backend: Backend, database: string, runId: string, steps: number): Promise<void> {
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
