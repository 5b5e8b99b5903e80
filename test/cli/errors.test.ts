import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { BACKENDS, type Backend } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { cli, expectOneLineError } from "./cli.js";
import { storeOf } from "../../src/internal.js";
import { scratchDir } from "../scratch.js";

/** A database that exists but is not Cairn's: an empty PostgreSQL database, a SQLite file of someone else's. */
async function foreignDatabase(backend: Backend): Promise<string> {
  const db = await backend.freshDatabase();
  if (backend.name === "sqlite") {
    const sqlite = new Database(db);
    sqlite.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)");
    sqlite.close();
  }
  return db;
}

async function tableNames(backend: Backend, db: string): Promise<string[]> {
  if (backend.name === "sqlite") {
    const sqlite = new Database(db, { readonly: true });
    try {
      return (sqlite.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as { name: string }[]).map((r) => r.name);
    } finally {
      sqlite.close();
    }
  }
  const client = new pg.Client({ connectionString: db });
  await client.connect();
  try {
    const result = await client.query<{ tablename: string }>("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1");
    return result.rows.map((r) => r.tablename);
  } finally {
    await client.end();
  }
}

const EVERY_DATABASE_COMMAND = [
  ["runs"],
  ["show", "x"],
  ["sql", "SELECT 1"],
  ["cancel", "x"],
  ["resume", "x"],
  ["fork", "x", "--from", "0"],
  ["send", "x", "t", "1"],
];

describe.each(BACKENDS)("cairn errors on $name", (backend) => {
  const env = cairnFactory(backend);

  it("reports an unknown run id in one line, for every command that takes one", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    await storeOf(cairn).migrate();
    for (const args of [
      ["show", "nope"],
      ["cancel", "nope"],
      ["resume", "nope"],
      ["fork", "nope", "--from", "0"],
      ["send", "nope", "topic", "1"],
    ]) {
      expectOneLineError(await cli([...args, "--database", db]), /no run with id "nope" — list runs with `cairn runs`/);
    }
  });

  it("reports malformed JSON, missing and extra arguments, unknown commands and options in one line", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("wait", async (ctx) => ctx.recv("t"));
    await wf.start(undefined, { id: "w1" });
    expectOneLineError(await cli(["send", "w1", "t", "{approved: true}", "--database", db]), /malformed JSON message/);
    expectOneLineError(await cli(["send", "w1", "t", "--database", db]), /missing <json>/);
    expectOneLineError(await cli(["show", "--database", db]), /missing <runId>/);
    expectOneLineError(await cli(["show", "w1", "extra", "--database", db]), /unexpected argument "extra"/);
    expectOneLineError(await cli(["frobnicate", "--database", db]), /unknown command "frobnicate"/);
    expectOneLineError(await cli(["runs", "--colour", "--database", db]), /unknown option --colour/);
    expectOneLineError(await cli(["runs", "--status", "done", "--database", db]), /unknown status "done"/);
    expectOneLineError(await cli(["runs", "--database"]), /--database needs a value/);
  });

  it("refuses a database that is not Cairn's, and does not turn it into one", async () => {
    const db = await foreignDatabase(backend);
    const before = await tableNames(backend, db);
    for (const args of EVERY_DATABASE_COMMAND) {
      expectOneLineError(await cli([...args, "--database", db]), /is not a Cairn database/);
    }
    expect(await tableNames(backend, db)).toEqual(before);
  });
});

describe("cairn errors on SQLite files", () => {
  it("never creates a database file: a missing one is an error", async () => {
    const dir = scratchDir("cairn-cli-");
    const missing = join(dir, "missing.db");
    for (const args of EVERY_DATABASE_COMMAND) {
      expectOneLineError(await cli([...args, "--database", missing]), /no database at .*missing\.db/);
    }
    expectOneLineError(await cli(["runs"], { CAIRN_DATABASE: missing }), /no database at .*missing\.db/);
    expect(existsSync(missing)).toBe(false);
  });

  it("refuses a file that is not SQLite at all", async () => {
    const file = join(scratchDir("cairn-cli-"), "notes.txt");
    writeFileSync(file, "not a database\n".repeat(100));
    expectOneLineError(await cli(["runs", "--database", file]), /notes\.txt is not a Cairn database/);
    expectOneLineError(await cli(["cancel", "x", "--database", file]), /notes\.txt is not a Cairn database/);
  });
});
