import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { createInterface } from "node:readline";
import { CairnError, TimeoutError } from "../../errors.js";
import { emptyQuery, OperatorQueryRefusedError, severalStatements, validTimeoutMs } from "../operator-query.js";
import type { OperatorQueryOptions, QueryResult } from "../store.js";

/**
 * `cairn sql` on SQLite: an operator's query, in a child process that is killed at the timeout.
 *
 * Why a process: better-sqlite3 exposes neither `sqlite3_interrupt` nor a progress handler, and a
 * worker thread cannot be stopped while SQLite runs (`worker.terminate()` waits for native code to
 * return to JavaScript, which a runaway recursive CTE never does — measured). A process dies at
 * SIGKILL wherever it is.
 *
 * Which mechanism refuses what (all SQLite's own):
 * - any write: the child opens the file read-only (SQLITE_OPEN_READONLY), sets `PRAGMA query_only`,
 *   and runs only a statement SQLite itself reports as read-only and returning rows
 *   (`sqlite3_stmt_readonly`, `sqlite3_stmt_busy`'s column count): ATTACH, PRAGMA assignments,
 *   VACUUM INTO are refused.
 * - several statements: `prepare` compiles exactly one and refuses a tail.
 * - `load_extension()`: extension loading is off in better-sqlite3's connections.
 * - a long query: SIGKILL at the timeout (the file is opened read-only, so killing it loses nothing).
 */
export async function sqliteOperatorQuery(path: string, sql: string, options: OperatorQueryOptions): Promise<QueryResult> {
  if (sql.trim() === "") throw emptyQuery();
  const timeoutMs = validTimeoutMs(options.timeoutMs);
  const child = spawn(process.execPath, ["-e", CHILD, BETTER_SQLITE3], { stdio: ["pipe", "pipe", "pipe"] });
  child.stdin.end(JSON.stringify({ path, sql }));
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk.slice(0, 4000)));
  let columns: string[] = [];
  const rows: Record<string, unknown>[] = [];
  let failure: { message: string; code?: string; refused?: boolean } | undefined;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, timeoutMs);
  const exited = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  try {
    for await (const line of createInterface({ input: child.stdout, crlfDelay: Infinity })) {
      if (line === "") continue;
      const message = JSON.parse(line, reviveBlobs) as unknown;
      if (Array.isArray(message)) {
        const row: Record<string, unknown> = {};
        columns.forEach((column, i) => (row[column] = message[i]));
        rows.push(row);
      } else {
        const header = message as { columns?: string[]; error?: typeof failure };
        if (header.columns !== undefined) columns = header.columns;
        if (header.error !== undefined) failure = header.error;
      }
    }
    const code = await exited;
    if (timedOut) {
      throw new TimeoutError(`the query ran past its ${timeoutMs} ms timeout and was stopped — narrow it, or pass --timeout <ms>`);
    }
    if (failure !== undefined && /more than one statement/i.test(failure.message)) throw severalStatements();
    if (failure?.refused === true) {
      throw new OperatorQueryRefusedError(failure.message, "give one SELECT (or WITH ... SELECT) statement");
    }
    if (failure !== undefined) throw Object.assign(new Error(failure.message), failure.code === undefined ? {} : { code: failure.code });
    if (code !== 0) throw new CairnError(`the query process ended with code ${String(code)}: ${stderr.trim()}`);
    return { columns, rows };
  } finally {
    clearTimeout(timer);
    if (child.exitCode === null) child.kill("SIGKILL");
  }
}

const BETTER_SQLITE3 = createRequire(import.meta.url).resolve("better-sqlite3");

function reviveBlobs(_key: string, value: unknown): unknown {
  if (value !== null && typeof value === "object" && typeof (value as { $blob?: unknown }).$blob === "string") {
    return Buffer.from((value as { $blob: string }).$blob, "base64");
  }
  return value;
}

/**
 * The child: reads `{ path, sql }` on stdin, writes NDJSON on stdout — `{"columns": [...]}`, then one
 * array per row, or `{"error": {...}}`. CommonJS, so it runs the same from the sources and from dist.
 */
const CHILD = `
const Database = require(process.argv[1]);
let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => (input += chunk));
process.stdin.on("end", () => {
  const { path, sql } = JSON.parse(input);
  const replacer = (_key, value) =>
    value !== null && typeof value === "object" && value.type === "Buffer" && Array.isArray(value.data)
      ? { $blob: Buffer.from(value.data).toString("base64") }
      : typeof value === "bigint" ? value.toString() : value;
  const line = (value) => JSON.stringify(value, replacer) + "\\n";
  try {
    const db = new Database(path, { readonly: true, fileMustExist: true });
    db.pragma("query_only = 1");
    db.pragma("busy_timeout = 1000");
    const statement = db.prepare(sql);
    if (!statement.readonly || !statement.reader) {
      process.stdout.write(line({ error: { refused: true, message: "the statement does not only read (SQLite reports it as writing or returning no rows)" } }));
      return;
    }
    statement.raw(true);
    process.stdout.write(line({ columns: statement.columns().map((c) => c.name) }));
    let chunk = "";
    for (const row of statement.iterate()) {
      chunk += line(row);
      if (chunk.length > 65536) {
        process.stdout.write(chunk);
        chunk = "";
      }
    }
    process.stdout.write(chunk);
  } catch (error) {
    const refused = /readonly|read-only|not authorized|query_only/i.test(String(error && error.message));
    process.stdout.write(line({ error: { message: String(error && error.message), code: error && error.code, refused } }));
  }
});
`;
