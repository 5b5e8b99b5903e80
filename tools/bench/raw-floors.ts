import Database from "better-sqlite3";
import pg from "pg";
import { presizeWal } from "../internal.js";
import { driveRuns } from "./peers/workload.js";
import type { Timing } from "./stats.js";

/**
 * The floors: what the database alone does when a program commits one journal-shaped row per
 * transaction, with the durability Cairn asks for. No engine can record sequential steps faster
 * than its database commits them one at a time, so Cairn's sequential rate is reported as a
 * fraction of these.
 *
 * The table has a journal row's shape and primary key (run_id, seq), and each row's output is the
 * JSON text of a small value, as a step's would be. Each insert is its own (autocommit)
 * transaction: on SQLite in WAL mode with synchronous=FULL, one WAL fsync per row; on PostgreSQL,
 * one WAL flush per row (the database's fsync and synchronous_commit settings apply).
 *
 * On SQLite the WAL file is first written out to its working size (src/store/sqlite/wal-presize.ts),
 * as Cairn's store does when it opens.
 *
 * `durable: false` (SQLite synchronous=OFF; on PostgreSQL the scratch database's setting) takes
 * the disk out, leaving what the statements cost the CPU: the baseline for the engine's overhead.
 */
const JOURNAL_TABLE = `CREATE TABLE journal (
  run_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  name TEXT NOT NULL,
  output TEXT,
  ts BIGINT NOT NULL,
  PRIMARY KEY (run_id, seq)
)`;

const RUN_ID = "raw-floor";

/** The floor's SQLite file: WAL mode, the journal table, and its insert. */
function openRawSqlite(path: string, durable: boolean): { db: Database.Database; insert: Database.Statement } {
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.pragma(`synchronous = ${durable ? "FULL" : "OFF"}`);
  db.exec(JOURNAL_TABLE);
  // As Cairn's store does when it opens: commits then write into the WAL file's blocks instead
  // of growing it, whose fsync costs a file-system journal commit more. The floor is the best
  // the database does.
  if (durable) presizeWal(db);
  return { db, insert: db.prepare("INSERT INTO journal (run_id, seq, name, output, ts) VALUES (?, ?, ?, ?, ?)") };
}

export function rawSqliteSequential(path: string, rows: number, durable = true): Timing {
  const { db, insert } = openRawSqlite(path, durable);
  try {
    const latenciesUs: number[] = [];
    const begin = performance.now();
    for (let seq = 0; seq < rows; seq++) {
      const t0 = performance.now();
      insert.run(RUN_ID, seq, "step", JSON.stringify({ i: seq }), Date.now());
      latenciesUs.push((performance.now() - t0) * 1000);
    }
    return { operations: rows, elapsedMs: performance.now() - begin, latenciesUs };
  } finally {
    db.close();
  }
}

/**
 * The concurrent floor on SQLite: `runs` runs of `rowsPerRun` journal rows, `clients` at a time,
 * each committing its rows one after another and waiting for each to be durable, as runs with
 * steps in flight do (a client takes the next run when one ends, so the runs in flight have
 * neighbouring ids, as a workload's runs started in order do — their rows then share the index's
 * leaf pages, and a group commit writes a handful of pages, not one per client). The rows meet in
 * a group commit, as Cairn's do: rows asked for in one turn of the event loop are inserted in one
 * transaction on the next (one fsync at FULL), and every client whose row it carries goes on after
 * it. What no engine on this file can beat with that many runs in flight: each row waits for an
 * fsync that began after it was asked for, so the rate is at most `clients` ÷ (fsync + one turn's
 * inserts).
 */
export async function rawSqliteGroupCommit(path: string, clients: number, runs: number, rowsPerRun: number, durable = true): Promise<Timing> {
  const { db, insert } = openRawSqlite(path, durable);
  try {
    type Pending = { runId: string; seq: number; done: () => void };
    let queue: Pending[] = [];
    const insertAll = db.transaction((rows: Pending[]) => {
      for (const row of rows) insert.run(row.runId, row.seq, "step", JSON.stringify({ i: row.seq }), Date.now());
    });
    const flush = () => {
      const rows = queue;
      queue = [];
      insertAll.immediate(rows);
      for (const row of rows) row.done();
    };
    const commit = (runId: string, seq: number) =>
      new Promise<void>((done) => {
        if (queue.length === 0) setImmediate(flush);
        queue.push({ runId, seq, done });
      });
    const { wallMs } = await driveRuns(runs, clients, async (run) => {
      for (let seq = 0; seq < rowsPerRun; seq++) await commit(`raw-${run}`, seq);
    });
    return { operations: runs * rowsPerRun, elapsedMs: wallMs, latenciesUs: [] };
  } finally {
    db.close();
  }
}

export async function rawPostgresSequential(url: string, rows: number): Promise<Timing> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    await client.query(JOURNAL_TABLE);
    const latenciesUs: number[] = [];
    const begin = performance.now();
    for (let seq = 0; seq < rows; seq++) {
      const t0 = performance.now();
      await client.query({
        name: "raw_floor_insert",
        text: "INSERT INTO journal (run_id, seq, name, output, ts) VALUES ($1, $2, $3, $4, $5)",
        values: [RUN_ID, seq, "step", JSON.stringify({ i: seq }), Date.now()],
      });
      latenciesUs.push((performance.now() - t0) * 1000);
    }
    return { operations: rows, elapsedMs: performance.now() - begin, latenciesUs };
  } finally {
    await client.end();
  }
}
