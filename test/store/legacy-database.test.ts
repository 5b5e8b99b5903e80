import { readFileSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { Cairn, NotACairnDatabaseError, type Workflow } from "../../src/index.js";
import { BACKENDS, type Backend } from "../backends.js";

/**
 * A database written before layers owned their schemas (Cairn at c1fbf11: one migration list,
 * versions 1-5, the agents' tables as version 2) opens with today's Cairn: every row is kept, no
 * migration runs twice, each layer's ledger takes over what the old list applied, and a run that
 * was waiting then continues. The fixtures are dumps of databases that commit's code wrote.
 */

const fixtures = join(dirname(fileURLToPath(import.meta.url)), "fixtures");
const cleanups: (() => Promise<void>)[] = [];
// DROP DATABASE waits for a checkpoint, which a server busy with other suites may take long to make.
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
}, 180_000);

type Rows = Record<string, unknown>[];

/** Plain SQL on the database, past Cairn: what is really stored. */
async function rows(backend: Backend, database: string, sql: string): Promise<Rows> {
  if (backend.name === "sqlite") {
    const db = new Database(database, { readonly: true });
    try {
      return db.prepare(sql).all() as Rows;
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: database });
  await client.connect();
  try {
    return (await client.query(sql)).rows as Rows;
  } finally {
    await client.end();
  }
}

async function legacyDatabase(backend: Backend): Promise<string> {
  const database = await backend.freshDatabase();
  if (backend.name === "sqlite") {
    const db = new Database(database);
    db.exec(readFileSync(join(fixtures, "legacy-v5-sqlite.sql"), "utf8"));
    db.close();
    cleanups.push(async () => rmSync(dirname(database), { recursive: true, force: true }));
    return database;
  }
  const client = new pg.Client({ connectionString: database });
  await client.connect();
  try {
    await client.query(readFileSync(join(fixtures, "legacy-v5-postgres.sql"), "utf8"));
  } finally {
    await client.end();
  }
  cleanups.push(async () => {
    const name = new URL(database).pathname.slice(1);
    const admin = new pg.Client({ connectionString: process.env.CAIRN_TEST_POSTGRES_URL });
    await admin.connect();
    try {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  });
  return database;
}

/** The workflow the fixture's runs belong to, exactly as the old code registered it. */
function open(database: string): { cairn: Cairn; legacy: Workflow<{ n: number }, { b: number; bigLen: number }> } {
  const cairn = new Cairn({ database, onError: () => undefined });
  cleanups.push(() => cairn.shutdown());
  const big = "x".repeat(600);
  const legacy = cairn.workflow("legacy", async (ctx, input: { n: number }) => {
    const a = await ctx.step("a", async () => ({ n: input.n, big }));
    await ctx.setEvent("stage", "before-recv");
    const msg = await ctx.recv<{ add: number }>("go");
    const b = await ctx.step("b", async () => a.n + msg!.add);
    return { b, bigLen: a.big.length };
  });
  return { cairn, legacy };
}

const count = async (backend: Backend, database: string, sql: string): Promise<number> =>
  Number((await rows(backend, database, `SELECT count(*) AS n FROM ${sql}`))[0]!.n);

describe.each(BACKENDS)("a database from before layers, on $name", (backend) => {
  it("migrates forward without loss: rows kept, nothing applied twice, a waiting run continues", async () => {
    const database = await legacyDatabase(backend);
    const { cairn } = open(database);
    await cairn.launch();

    const ledger = await rows(backend, database, "SELECT layer, version, name FROM cairn_layer_migrations ORDER BY layer, version");
    expect(ledger.map((r) => `${String(r.layer)} ${Number(r.version)} ${String(r.name)}`)).toEqual([
      "agents 1 agents",
      "agents 2 retention",
      "core 1 engine",
      "core 2 replay order",
      "core 3 executor-namespace-and-recovery-base",
      "core 4 retention",
      "core 5 executor-capacity",
      "core 6 executor-wake-channel",
      "core 7 runs-held-by-a-layer",
      "cron 1 schedules",
      "queues 1 queues",
      "queues 2 delayed starts by time",
      "queues 3 wake channels",
      "queues 4 queued-runs-held",
      "supervision 1 supervision",
      "telemetry 1 trace contexts",
    ]);
    const legacyList = await rows(backend, database, "SELECT version FROM cairn_migrations ORDER BY version");
    expect(legacyList.map((r) => Number(r.version))).toEqual([1, 2, 3, 4, 5, 6]);

    // The old rows, as they were.
    const done = await cairn.run<{ b: number; bigLen: number }>("legacy-done").result();
    expect(done).toEqual({ b: 11, bigLen: 600 });
    expect(await count(backend, database, "cairn_steps WHERE run_id = 'legacy-done'")).toBe(4);
    for (const table of [
      "cairn_model_calls",
      "cairn_tool_calls",
      "cairn_approvals",
      "cairn_budgets",
      "cairn_memory",
      "cairn_artifacts",
      "cairn_stream_chunks",
    ]) {
      expect(await count(backend, database, table), table).toBe(1);
    }
    const [costs] = await rows(backend, database, "SELECT total_tokens, cost_usd FROM cairn_costs WHERE run_id = 'legacy-done'");
    expect(Number(costs!.total_tokens)).toBe(7);
    expect(Number(costs!.cost_usd)).toBe(0.5);

    // The waiting run continues where the old code left it: its step "a" (a payload) is replayed.
    await cairn.send("legacy-waiting", "go", { add: 5 });
    expect(await cairn.run("legacy-waiting").result()).toEqual({ b: 7, bigLen: 600 });
    expect(await cairn.getEvent("legacy-waiting", "stage")).toBe("before-recv");

    // The agents' hooks work on the old rows: a fork copies the model call below its fork point.
    await cairn.fork("legacy-done", { fromSeq: 1, id: "legacy-fork" });
    expect(await count(backend, database, "cairn_model_calls WHERE run_id = 'legacy-fork'")).toBe(1);
  });

  it("opens again without migrating again, and retention reaches the agent tables", async () => {
    const database = await legacyDatabase(backend);
    const first = open(database);
    await first.cairn.launch();
    await first.cairn.shutdown();
    const ledger = await count(backend, database, "cairn_layer_migrations");
    const second = open(database);
    await second.cairn.launch();
    expect(await count(backend, database, "cairn_layer_migrations")).toBe(ledger);

    const deleted = await second.cairn.runs.delete({ ids: ["legacy-done"] });
    expect(deleted.runIds).toEqual(["legacy-done"]);
    for (const table of ["cairn_model_calls", "cairn_tool_calls", "cairn_budgets", "cairn_artifacts", "cairn_stream_chunks"]) {
      expect(await count(backend, database, `${table} WHERE run_id = 'legacy-done'`), table).toBe(0);
    }
    // Memory belongs to the agent, not the run.
    expect(await count(backend, database, "cairn_memory")).toBe(1);
    // The prompt payload no row names any more is collected.
    expect(await count(backend, database, "cairn_payloads WHERE hash = 'sha256:legacyprompt'")).toBe(0);
  });

  it("records version 6 in the old list (so a Cairn from before layers refuses it) and refuses a newer layer", async () => {
    const database = await legacyDatabase(backend);
    const first = open(database);
    await first.cairn.launch();
    await first.cairn.shutdown();
    // c1fbf11 refuses any version above 5 with NotACairnDatabaseError ("newer than this Cairn knows").
    const [max] = await rows(backend, database, "SELECT MAX(version) AS v FROM cairn_migrations");
    expect(Number(max!.v)).toBe(6);

    await write(backend, database, "INSERT INTO cairn_layer_migrations (layer, version, name, applied_at) VALUES ('agents', 9, 'future', 0)");
    const second = open(database);
    await expect(second.cairn.launch()).rejects.toThrow(NotACairnDatabaseError);
    await expect(second.cairn.launch()).rejects.toThrow(/agents schema version 9, newer than this Cairn knows \(2\)/);
  });
});

async function write(backend: Backend, database: string, sql: string): Promise<void> {
  if (backend.name === "sqlite") {
    const db = new Database(database);
    db.exec(sql);
    db.close();
    return;
  }
  const client = new pg.Client({ connectionString: database });
  await client.connect();
  await client.query(sql).finally(() => client.end());
}
