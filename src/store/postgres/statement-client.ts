import pg from "pg";
import { arrayLiteral } from "./array-literal.js";

type Callback = (error: Error | undefined, result: pg.QueryResult) => void;

/** The fields of a `pg.Query` set here (pg reads them when it sends the query). */
interface StatementQuery {
  name?: string;
  values?: unknown;
  callback?: Callback;
}

/** What a query config may carry besides its statement for the plain path below to leave it alone. */
const OTHER_SETTINGS = ["rowMode", "types", "queryMode", "binary", "portal", "rows", "callback", "query_timeout"] as const;

/**
 * The pool's client class: `pg.Client` with two costs taken out of the statements Cairn sends.
 *
 * - `client.query({ name, text, values })` — how every Cairn statement is sent, named so the
 *   server keeps it prepared — first copies the config with `Object.getOwnPropertyDescriptors`
 *   and `Object.defineProperties` (pg 8.23's `normalizeQueryConfig`, so that it never mutates the
 *   caller's object): ~2.4 µs of CPU a statement here, about the JavaScript of a whole step's
 *   journal write besides, and an object in dictionary mode that the rest of the query then
 *   reads. A config that is only a statement (`name`, `text`, `values`) is built into its `Query`
 *   from the text instead, which copies nothing: the same Query pg builds (text, name, values; no
 *   row mode, types, portal or timeout), sent the same way, with a promise or with the caller's
 *   callback (`pool.query` passes one).
 * - Its array values are sent as literals made in one piece (array-literal.ts): the text pg would
 *   make of them, with a fraction of the garbage.
 *
 * Any other config, a string or a submittable goes to `pg.Client.query` unchanged.
 *
 * It also keeps, for the AnswerWatch, how long its plain statements have waited for an answer.
 */
export class StatementClient extends pg.Client {
  /** Plain statements sent and not yet answered (AnswerWatch). */
  private unanswered = 0;
  /** When the server last answered, or was sent a statement while none was awaited (Date.now()). */
  private progressAt = 0;

  /** How long the oldest statement awaited has waited for the server without any answer since (0: none awaited). */
  waitedForAnswerMs(now: number): number {
    return this.unanswered === 0 ? 0 : now - this.progressAt;
  }

  /**
   * Drops the connection at once, failing every statement on it with `error` (AnswerWatch): pg's
   * own `end()` waits for the server to answer, which is what it does not do.
   */
  abandon(error: Error): void {
    this.on("error", () => undefined); // whoever holds the client hears the error through its statements
    (this as unknown as { connection: { stream: { destroy(error: Error): void } } }).connection.stream.destroy(error);
  }

  private answered(): void {
    this.unanswered--;
    this.progressAt = Date.now();
  }

  override query(...args: unknown[]): never {
    const [config, values, callback] = args as [unknown, unknown, unknown];
    if (!isPlainStatement(config) || typeof values === "function" || (callback !== undefined && typeof callback !== "function")) {
      return (super.query as (...a: unknown[]) => never)(...args);
    }
    const query = new pg.Query(config.text) as StatementQuery;
    if (config.name !== undefined) query.name = config.name;
    // As pg's normalizeQueryConfig: values given beside the config win when truthy. A non-array is
    // left as it is, for pg's own "values must be an array" error.
    const bound: unknown = values || config.values;
    if (bound != null) query.values = Array.isArray(bound) ? withArrayLiterals(bound) : bound;
    if (this.unanswered++ === 0) this.progressAt = Date.now();
    if (callback !== undefined) {
      // The callback style, as the pool's own `pool.query` calls its client.
      query.callback = (error, res) => {
        this.answered();
        (callback as Callback)(error, res);
      };
      return (super.query as (q: unknown) => never)(query);
    }
    const result = new Promise<pg.QueryResult>((resolve, reject) => {
      query.callback = (error, res) => {
        this.answered();
        if (error === undefined || error === null) return resolve(res);
        // As pg does on its promise path: a stack that leads back to the caller, not to the socket.
        // (A type parser may throw a non-object; capturing a stack on it would throw here, on the
        // socket's data path, and the promise would never settle.)
        if (typeof error === "object") Error.captureStackTrace(error);
        reject(error);
      };
    });
    (super.query as (q: unknown) => unknown)(query);
    return result as never;
  }
}

/** `values` with each array of plain elements as its literal (array-literal.ts); the same array when it has none. */
function withArrayLiterals(values: unknown[]): unknown[] {
  let out = values;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (!Array.isArray(value)) continue;
    const literal = arrayLiteral(value);
    if (literal === null) continue;
    if (out === values) out = values.slice();
    out[i] = literal;
  }
  return out;
}

function isPlainStatement(config: unknown): config is { name?: string; text: string; values?: unknown[] } {
  if (typeof config !== "object" || config === null) return false;
  const c = config as Record<string, unknown>;
  if (typeof c.text !== "string" || typeof c.submit === "function") return false;
  for (const key of OTHER_SETTINGS) if (c[key] !== undefined) return false;
  return true;
}
