import { execFileSync } from "node:child_process";
import { chmodSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import {
  Cairn,
  CairnError,
  InvalidSpecError,
  MAX_NAME_LENGTH,
  PermissionDeniedError,
  RunNotFoundError,
  TimeoutError,
  UnserializableError,
} from "../../src/index.js";
import { validateOperationName } from "../../src/engine/names.js";
import { BACKENDS, type Backend } from "../backends.js";
import { cli, expectOneLineError } from "../cli/cli.js";
import { cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";
import { scratchDir } from "../scratch.js";

/**
 * A catalogue of bad inputs, each with the error it must give — values, names, ids, topics, options,
 * SQL, CLI arguments, database files and URLs — run on both backends. Every case must fail loudly
 * with a typed error (or one CLI line) naming what was wrong, and lose nothing: after the whole
 * catalogue the database still runs new work and holds exactly the runs it held.
 */

type ErrorClass = abstract new (...args: never[]) => Error;

interface ApiCase {
  name: string;
  act: (fx: Fixture) => unknown;
  error: ErrorClass;
  message: RegExp;
}

interface CliCase {
  name: string;
  args: (fx: Fixture) => string[];
  stderr: RegExp;
  /** Backend the case applies to; default both. */
  only?: Backend["name"];
}

interface Fixture {
  cairn: Cairn;
  database: string;
  backend: Backend;
  echo: { start(input: unknown, options?: { id?: string; timeoutMs?: number }): Promise<unknown> };
}

const cycle: Record<string, unknown> = {};
cycle.self = cycle;
const LONE_SURROGATE = "😀".slice(0, 1);
const LONG = "x".repeat(MAX_NAME_LENGTH + 1);
const TEN_KB = "i".repeat(10_000);

const API_CASES: ApiCase[] = [
  // values
  { name: "input: a function", act: (f) => f.echo.start(() => 1), error: UnserializableError, message: /function/ },
  { name: "input: a cycle", act: (f) => f.echo.start(cycle), error: UnserializableError, message: /cycle|circular/i },
  { name: "input: a class instance", act: (f) => f.echo.start(new (class Point {})()), error: UnserializableError, message: /class Point/ },
  { name: "input: a symbol", act: (f) => f.echo.start({ s: Symbol("x") }), error: UnserializableError, message: /symbol/i },
  { name: "message: a function", act: (f) => f.cairn.send("done", "t", () => 1), error: UnserializableError, message: /function/ },
  { name: "start timeoutMs: negative", act: (f) => f.echo.start(1, { timeoutMs: -5 }), error: InvalidSpecError, message: /invalid timeoutMs: -5/ },
  { name: "start timeoutMs: NaN", act: (f) => f.echo.start(1, { timeoutMs: Number.NaN }), error: InvalidSpecError, message: /invalid timeoutMs/ },
  // workflow and agent names
  {
    name: "workflow name: empty",
    act: (f) => f.cairn.workflow("", async () => 1),
    error: InvalidSpecError,
    message: /invalid workflow name: "" — .*must not be empty/,
  },
  {
    name: "workflow name: NUL",
    act: (f) => f.cairn.workflow("a\u0000b", async () => 1),
    error: InvalidSpecError,
    message: /invalid workflow name: .*NUL/,
  },
  {
    name: "workflow name: lone surrogate",
    act: (f) => f.cairn.workflow(`w${LONE_SURROGATE}`, async () => 1),
    error: InvalidSpecError,
    message: /well-formed Unicode/,
  },
  {
    name: "workflow name: too long",
    act: (f) => f.cairn.workflow(LONG, async () => 1),
    error: InvalidSpecError,
    message: /at most 255 characters; this one has 256/,
  },
  {
    name: "workflow name: a number",
    act: (f) => f.cairn.workflow(42 as never, async () => 1),
    error: InvalidSpecError,
    message: /invalid workflow name: 42 — .*must be a string/,
  },
  { name: "workflow name: taken", act: (f) => f.cairn.workflow("echo", async () => 1), error: InvalidSpecError, message: /already registered/ },
  { name: "workflow fn: not a function", act: (f) => f.cairn.workflow("nofn", 5 as never), error: InvalidSpecError, message: /invalid fn/ },
  { name: "agent name: NUL", act: (f) => f.cairn.agent("bot\u0000", {} as never), error: InvalidSpecError, message: /invalid agent name: .*NUL/ },
  // run ids
  { name: "run id: empty", act: (f) => f.echo.start(1, { id: "" }), error: InvalidSpecError, message: /invalid id: "" — .*must not be empty/ },
  {
    name: "run id: 10 KB",
    act: (f) => f.echo.start(1, { id: TEN_KB }),
    error: InvalidSpecError,
    message: /invalid id: .*at most 255 characters; this one has 10000/,
  },
  { name: "run id: NUL", act: (f) => f.echo.start(1, { id: "r\u0000" }), error: InvalidSpecError, message: /invalid id: .*NUL/ },
  { name: "run id: lone surrogate", act: (f) => f.echo.start(1, { id: `r${LONE_SURROGATE}` }), error: InvalidSpecError, message: /lone surrogate/ },
  { name: "run id: a number", act: (f) => f.echo.start(1, { id: 7 as never }), error: InvalidSpecError, message: /must be a string/ },
  { name: "run handle: NUL id", act: (f) => f.cairn.run("x\u0000y"), error: InvalidSpecError, message: /invalid id/ },
  { name: "cancel: unknown run", act: (f) => f.cairn.cancel("no-such-run"), error: RunNotFoundError, message: /no run with id "no-such-run"/ },
  { name: "cancel: NUL id", act: (f) => f.cairn.cancel("\u0000"), error: InvalidSpecError, message: /invalid runId/ },
  { name: "resume: lone surrogate id", act: (f) => f.cairn.resume(LONE_SURROGATE), error: InvalidSpecError, message: /invalid runId/ },
  { name: "fork: NUL new id", act: (f) => f.cairn.fork("done", { fromSeq: 0, id: "f\u0000" }), error: InvalidSpecError, message: /invalid id/ },
  { name: "fork: negative fromSeq", act: (f) => f.cairn.fork("done", { fromSeq: -1 }), error: InvalidSpecError, message: /invalid fromSeq: -1/ },
  { name: "fork: to an id that exists", act: (f) => f.cairn.fork("done", { fromSeq: 0, id: "done" }), error: InvalidSpecError, message: /already exists/ },
  { name: "getEvent: NUL key", act: (f) => f.cairn.getEvent("done", "k\u0000"), error: InvalidSpecError, message: /invalid key/ },
  // topics
  { name: "send topic: empty", act: (f) => f.cairn.send("done", "", 1), error: InvalidSpecError, message: /invalid topic: "" — .*must not be empty/ },
  { name: "send topic: NUL", act: (f) => f.cairn.send("done", "t\u0000", 1), error: InvalidSpecError, message: /invalid topic/ },
  { name: "send topic: lone surrogate", act: (f) => f.cairn.send("done", LONE_SURROGATE, 1), error: InvalidSpecError, message: /invalid topic/ },
  { name: "send topic: too long", act: (f) => f.cairn.send("done", LONG, 1), error: InvalidSpecError, message: /invalid topic/ },
  {
    name: "send idempotencyKey: NUL",
    act: (f) => f.cairn.send("done", "t", 1, { idempotencyKey: "\u0000" }),
    error: InvalidSpecError,
    message: /invalid idempotencyKey/,
  },
  { name: "send: unknown run", act: (f) => f.cairn.send("nobody", "t", 1), error: RunNotFoundError, message: /no run with id "nobody"/ },
  // step names and topics inside a run (the engine's begin() calls this)
  { name: "step name: NUL", act: () => validateOperationName("step", "a\u0000"), error: InvalidSpecError, message: /invalid step name/ },
  { name: "step name: lone surrogate", act: () => validateOperationName("step", LONE_SURROGATE), error: InvalidSpecError, message: /invalid step name/ },
  { name: "recv topic: empty", act: () => validateOperationName("recv", ""), error: InvalidSpecError, message: /invalid topic/ },
  // options
  { name: "option leaseMs: 0", act: (f) => new Cairn({ database: f.database, leaseMs: 0 }), error: InvalidSpecError, message: /invalid leaseMs: 0/ },
  {
    name: "option pollIntervalMs: NaN",
    act: (f) => new Cairn({ database: f.database, pollIntervalMs: Number.NaN }),
    error: InvalidSpecError,
    message: /invalid pollIntervalMs/,
  },
  {
    name: "option retention: negative",
    act: (f) => new Cairn({ database: f.database, retention: { succeededAfterMs: -1 } }),
    error: InvalidSpecError,
    message: /invalid retention.succeededAfterMs: -1/,
  },
  // retention filters
  {
    name: "delete: status running",
    act: (f) => f.cairn.runs.delete({ status: "running" as never }),
    error: InvalidSpecError,
    message: /invalid status: "running"/,
  },
  { name: "delete: limit 0", act: (f) => f.cairn.runs.delete({ limit: 0 }), error: InvalidSpecError, message: /invalid limit: 0/ },
  { name: "delete: NUL id", act: (f) => f.cairn.runs.delete({ ids: ["\u0000"] }), error: InvalidSpecError, message: /invalid runId/ },
  // operator SQL
  { name: "sql: empty", act: (f) => storeOf(f.cairn).operatorQuery(""), error: InvalidSpecError, message: /invalid sql: "" — the query is empty/ },
  {
    name: "sql: a write",
    act: (f) => storeOf(f.cairn).operatorQuery("DELETE FROM cairn_runs"),
    error: PermissionDeniedError,
    message: /refused: cairn sql only reads/,
  },
  {
    name: "sql: two statements",
    act: (f) => storeOf(f.cairn).operatorQuery("SELECT 1; DELETE FROM cairn_runs"),
    error: PermissionDeniedError,
    message: /one statement at a time/,
  },
  {
    name: "sql: timeout 0",
    act: (f) => storeOf(f.cairn).operatorQuery("SELECT 1", { timeoutMs: 0 }),
    error: InvalidSpecError,
    message: /invalid timeoutMs: 0/,
  },
  {
    name: "sql: runaway query",
    act: (f) =>
      storeOf(f.cairn).operatorQuery("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c", { timeoutMs: 300 }),
    error: TimeoutError,
    message: /ran past its 300 ms timeout/,
  },
];

const CLI_CASES: CliCase[] = [
  { name: "sql: empty query", args: (f) => ["sql", "", "--database", f.database], stderr: /the query is empty/ },
  { name: "sql: two statements", args: (f) => ["sql", "SELECT 1; SELECT 2", "--database", f.database], stderr: /one statement at a time/ },
  {
    name: "sql: --timeout not a number",
    args: (f) => ["sql", "SELECT 1", "--timeout", "x", "--database", f.database],
    stderr: /--timeout must be an integer/,
  },
  { name: "show: no run id", args: (f) => ["show", "--database", f.database], stderr: /missing <runId>/ },
  { name: "show: --from -1", args: (f) => ["show", "done", "--from", "-1", "--database", f.database], stderr: /--from must be an integer ≥ 0/ },
  { name: "show: a control character in the run id", args: (f) => ["show", "a\u0001b", "--database", f.database], stderr: /no run with id/ },
  { name: "send: empty topic", args: (f) => ["send", "done", "", "1", "--database", f.database], stderr: /invalid topic: "" — .*must not be empty/ },
  { name: "send: malformed JSON", args: (f) => ["send", "done", "t", "{nope", "--database", f.database], stderr: /malformed JSON/ },
  { name: "send: 10 KB run id", args: (f) => ["send", TEN_KB, "t", "1", "--database", f.database], stderr: /invalid runId: .*at most 255/ },
  { name: "delete: nothing named", args: (f) => ["delete", "--database", f.database], stderr: /no runs named/ },
  { name: "delete: an unfinished run", args: (f) => ["delete", "waiting", "--database", f.database], stderr: /not deleted: run waiting is waiting/ },
  {
    name: "delete: --status running",
    args: (f) => ["delete", "--status", "running", "--database", f.database],
    stderr: /cannot delete runs in status "running"/,
  },
  {
    name: "delete: --older-than soon",
    args: (f) => ["delete", "--older-than", "soon", "--database", f.database],
    stderr: /--older-than must be a duration/,
  },
  { name: "cancel: unknown option", args: (f) => ["cancel", "done", "--force", "--database", f.database], stderr: /unknown option --force/ },
  { name: "gc: an extra argument", args: (f) => ["gc", "now", "--database", f.database], stderr: /unexpected argument "now"/ },
  { name: "--database: empty", args: () => ["runs", "--database", ""], stderr: /--database is empty/ },
  // database files
  { name: "database: a directory", args: () => ["runs", "--database", tmpdir()], stderr: /is a directory/, only: "sqlite" },
  { name: "database: a missing file", args: () => ["runs", "--database", join(tmpdir(), "no-such-cairn.db")], stderr: /no database at/, only: "sqlite" },
  { name: "database: a text file", args: () => ["runs", "--database", textFile()], stderr: /not an SQLite file at all/, only: "sqlite" },
  { name: "database: SQLite without Cairn", args: () => ["runs", "--database", emptySqlite()], stderr: /not a Cairn database/, only: "sqlite" },
  // URLs
  {
    name: "url: nothing listening",
    args: () => ["runs", "--database", "postgres://postgres@127.0.0.1:1/x"],
    stderr: /cannot connect to PostgreSQL/,
    only: "postgres",
  },
  {
    name: "url: no such database",
    args: (f) => ["runs", "--database", otherDatabase(f.database, "cairn_no_such_db")],
    stderr: /does not exist — create it/,
    only: "postgres",
  },
  {
    name: "url: not Cairn's database",
    args: (f) => ["runs", "--database", otherDatabase(f.database, "postgres")],
    stderr: /not a Cairn database/,
    only: "postgres",
  },
  {
    name: "url: password shown redacted",
    args: (f) => ["runs", "--database", withPassword(f.database, "hunter2", "cairn_no_such_db")],
    stderr: /^(?!.*hunter2)/,
    only: "postgres",
  },
];

function textFile(): string {
  const path = join(scratchDir("cairn-bad-"), "notes.txt");
  writeFileSync(path, "not a database\n".repeat(200));
  return path;
}

function emptySqlite(): string {
  const path = join(scratchDir("cairn-bad-"), "other.db");
  const db = new Database(path);
  db.exec("CREATE TABLE t (x)");
  db.close();
  return path;
}

function otherDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

function withPassword(url: string, password: string, name: string): string {
  const parsed = new URL(otherDatabase(url, name));
  parsed.password = password;
  return parsed.toString();
}

describe.each(BACKENDS)("a catalogue of bad inputs on $name", (backend) => {
  const env = cairnFactory(backend);

  it(`refuses ${API_CASES.length} bad API inputs with typed errors naming the field and value, and loses nothing`, async () => {
    const database = await env.database();
    const cairn = env.cairn(database);
    const echo = cairn.workflow("echo", async (ctx, input: unknown) => ctx.step("echo", () => input));
    const waiter = cairn.workflow("waiter", async (ctx) => ctx.recv("never"));
    await cairn.launch();
    await (await echo.start("ok", { id: "done" })).result();
    await waiter.start(undefined, { id: "waiting" });
    const fx: Fixture = { cairn, database, backend, echo: echo as Fixture["echo"] };
    const failures: string[] = [];
    for (const c of API_CASES) {
      try {
        await c.act(fx);
        failures.push(`${c.name}: no error`);
      } catch (error) {
        if (!(error instanceof c.error)) failures.push(`${c.name}: ${(error as Error).name}: ${(error as Error).message}`);
        else if (!c.message.test((error as Error).message)) failures.push(`${c.name}: message "${(error as Error).message}"`);
        else if (error instanceof CairnError && !(error instanceof InvalidSpecError) && !(error instanceof RunNotFoundError)) {
          // typed: a CairnError with a stable code
          expect(error.code).toMatch(/^[A-Z_]+$/);
        }
      }
    }
    expect(failures).toEqual([]);
    // Nothing was written by a refused input, and the bad names poisoned nothing: new work runs.
    const runs = await storeOf(cairn).select<{ id: string }>("SELECT id FROM cairn_runs ORDER BY id");
    expect(runs.map((r) => r.id)).toEqual(["done", "waiting"]);
    expect(await (await echo.start("after", { id: "after" })).result()).toBe("after");
    const boundary = "b".repeat(MAX_NAME_LENGTH);
    expect(await (await echo.start("edge", { id: boundary })).result()).toBe("edge");
    expect((await storeOf(cairn).getRun(boundary))?.id).toBe(boundary);
    const emoji = await echo.start("😀", { id: "emoji-😀" });
    expect(await emoji.result()).toBe("😀");
  });

  it(`answers ${CLI_CASES.filter((c) => c.only === undefined || c.only === backend.name).length} bad CLI inputs in one line with exit code 1`, async () => {
    const database = await env.database();
    const cairn = env.cairn(database);
    const echo = cairn.workflow("echo", async (ctx, input: unknown) => ctx.step("echo", () => input));
    const waiter = cairn.workflow("waiter", async (ctx) => ctx.recv("never"));
    await cairn.launch();
    await (await echo.start("ok", { id: "done" })).result();
    await waiter.start(undefined, { id: "waiting" });
    const fx: Fixture = { cairn, database, backend, echo: echo as Fixture["echo"] };
    for (const c of CLI_CASES) {
      if (c.only !== undefined && c.only !== backend.name) continue;
      const result = await cli(c.args(fx));
      try {
        expectOneLineError(result, c.stderr);
      } catch (error) {
        throw new Error(`${c.name}: ${(error as Error).message}\n${result.stderr}`);
      }
    }
    expect((await storeOf(cairn).getRun("waiting"))?.status).toBe("waiting");
    // Twenty CLI processes one after another: each loads the whole package (about 1 s of imports,
    // half of it the AI SDK), which on a loaded 2-core machine took 55–60 s. Not a timed assertion.
  }, 150_000);
});

describe("bad inputs that need a file the user cannot write (SQLite)", () => {
  it("cancel on a read-only database file says so, instead of reporting a bug in cairn", async () => {
    const dir = scratchDir("cairn-ro-");
    const database = join(dir, "ro.db");
    const cairn = new Cairn({ database, onError: () => undefined });
    const waiter = cairn.workflow("waiter", async (ctx) => ctx.recv("never"));
    await cairn.launch();
    await waiter.start(undefined, { id: "w" });
    await cairn.shutdown();
    chmodSync(dir, 0o777);
    chmodSync(database, 0o444);
    const asRoot = process.getuid?.() === 0;
    let result: { code: number; stdout: string; stderr: string };
    if (asRoot) {
      // Root writes any file: run the CLI as nobody.
      const main = new URL("../../dist/cli/main.js", import.meta.url).pathname;
      try {
        execFileSync("runuser", ["-u", "nobody", "--", process.execPath, main, "cancel", "w", "--database", database], {
          stdio: "pipe",
          env: { ...process.env, NO_COLOR: "1" },
        });
        result = { code: 0, stdout: "", stderr: "" };
      } catch (error) {
        const e = error as { status: number; stdout: Buffer; stderr: Buffer };
        result = { code: e.status, stdout: e.stdout.toString(), stderr: e.stderr.toString() };
      }
    } else {
      result = await cli(["cancel", "w", "--database", database]);
    }
    expectOneLineError(result, /the database is read-only here .* — this command writes/);
    expect(result.stderr).not.toMatch(/bug in cairn/);
  });

  it("a peer holding SQLite's write lock makes a writer wait a bounded time, then fail with a clear error", async () => {
    const dir = scratchDir("cairn-busy-");
    const database = join(dir, "busy.db");
    const cairn = new Cairn({ database, onError: () => undefined });
    const waiter = cairn.workflow("waiter", async (ctx) => ctx.recv("never"));
    await cairn.launch();
    await waiter.start(undefined, { id: "w" });
    await cairn.shutdown();
    // A process stopped inside a write transaction: here, a connection that never commits.
    const holder = new Database(database);
    holder.exec("BEGIN IMMEDIATE");
    try {
      const started = Date.now();
      const result = await cli(["cancel", "w", "--database", database]);
      expectOneLineError(result, /the database stayed locked by another process .* — SQLite has one writer at a time/);
      expect(Date.now() - started).toBeLessThan(25_000);
    } finally {
      holder.exec("ROLLBACK");
      holder.close();
    }
  }, 40_000);
});
