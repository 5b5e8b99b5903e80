import pg from "pg";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import { InvalidSpecError } from "../../src/index.js";
import type { StoreExtension } from "../../src/store/extension.js";
import { openStore } from "../../src/store/open-store.js";
import { AGENTS_EXTENSION } from "../../src/ai/schema/agents-extension.js";
import { BACKENDS, type Backend } from "../backends.js";
import { cairnFactory } from "../harness.js";

/**
 * The extension contract, exercised by a layer the store has never heard of: its migrations are
 * applied under its own name, its table is writable by row operations, and its hooks run when a
 * run is forked, cancelled, resumed and deleted.
 */
const NOTES: StoreExtension = {
  name: "notes",
  migrations: [
    {
      version: 1,
      name: "notes",
      statements: [`CREATE TABLE cairn_notes (run_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, state TEXT NOT NULL)`],
    },
  ],
  tables: ["cairn_notes"],
  stepKinds: ["note"],
  hooks: {
    onFork: ["INSERT INTO cairn_notes (run_id, seq, body, state) SELECT $1, seq, body, state FROM cairn_notes WHERE run_id = $2 AND seq < $3"],
    onCancel: ["UPDATE cairn_notes SET state = 'withdrawn' WHERE run_id = $1"],
    onResume: ["UPDATE cairn_notes SET state = 'open' WHERE run_id = $1"],
    onDelete: { runTables: ["cairn_notes"], payloadColumns: [] },
  },
};

async function rows(backend: Backend, database: string, sql: string): Promise<Record<string, unknown>[]> {
  if (backend.name === "sqlite") {
    const db = new Database(database, { readonly: true });
    try {
      return db.prepare(sql).all() as Record<string, unknown>[];
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: database });
  await client.connect();
  try {
    return (await client.query(sql)).rows as Record<string, unknown>[];
  } finally {
    await client.end();
  }
}

describe.each(BACKENDS)("the extension contract on $name", (backend) => {
  const env = cairnFactory(backend);

  it("applies a layer's migrations under its name and runs its hooks with the run's own operations", async () => {
    const database = await env.database();
    const store = openStore(database);
    store.register(NOTES);
    store.register(NOTES); // the same extension again: nothing
    const cairn = env.cairn(database, { store });
    const wf = cairn.workflow("noted", async (ctx) => {
      await ctx.step("one", async () => 1);
      await ctx.recv("never", { timeoutMs: 60_000 });
    });
    await cairn.launch();
    await wf.start(undefined, { id: "r1" });
    await store.commit(null, [
      { type: "insert", table: "cairn_notes", values: { run_id: "r1", seq: 0, body: "first", state: "open" } },
      { type: "insert", table: "cairn_notes", values: { run_id: "r1", seq: 5, body: "later", state: "open" } },
    ]);
    const ledger = await rows(backend, database, "SELECT layer, version FROM cairn_layer_migrations WHERE layer = 'notes'");
    expect(ledger.map((r) => Number(r.version))).toEqual([1]);

    await cairn.fork("r1", { fromSeq: 1, id: "r1-fork" });
    expect((await rows(backend, database, "SELECT body FROM cairn_notes WHERE run_id = 'r1-fork'")).map((r) => r.body)).toEqual(["first"]);

    await cairn.cancel("r1");
    expect((await rows(backend, database, "SELECT DISTINCT state FROM cairn_notes WHERE run_id = 'r1'")).map((r) => r.state)).toEqual(["withdrawn"]);
    await cairn.resume("r1");
    expect((await rows(backend, database, "SELECT DISTINCT state FROM cairn_notes WHERE run_id = 'r1'")).map((r) => r.state)).toEqual(["open"]);

    await cairn.cancel("r1");
    await cairn.cancel("r1-fork");
    const deleted = await cairn.runs.delete({ ids: ["r1"] });
    expect(deleted.runIds).toEqual(["r1"]);
    expect(await rows(backend, database, "SELECT run_id FROM cairn_notes WHERE run_id = 'r1'")).toEqual([]);
    expect(await rows(backend, database, "SELECT run_id FROM cairn_notes WHERE run_id = 'r1-fork'")).toHaveLength(1);
  });

  it("refuses row operations on tables no layer declared, and layers that claim another's table or step kind", async () => {
    const database = await env.database();
    const store = openStore(database);
    const cairn = env.cairn(database, { store });
    await cairn.launch();
    await expect(
      store.commit(null, [{ type: "insert", table: "cairn_notes", values: { run_id: "x", seq: 0, body: "b", state: "open" } }]),
    ).rejects.toThrow(InvalidSpecError);
    expect(() => store.register({ ...NOTES, name: "thief", tables: [AGENTS_EXTENSION.tables[0]!] })).toThrow(/written by another layer/);
    expect(() => store.register({ ...NOTES, name: "kinds", tables: [], stepKinds: ["model"] })).toThrow(/already a step kind/);
    expect(() => store.register({ ...NOTES, name: "core" })).toThrow(InvalidSpecError);
    expect(() => store.register({ ...NOTES, tables: ["cairn_runs"] })).toThrow(/engine's own table/);
  });
});
