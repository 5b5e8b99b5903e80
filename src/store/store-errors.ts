import { NotACairnDatabaseError } from "../errors.js";

/**
 * The one place that reads driver errors (better-sqlite3's `SQLITE_*` codes, PostgreSQL's
 * SQLSTATEs, Node's socket codes, node-postgres's code-less connection errors) and says what kind
 * of failure each is. The store's retries, the engine's "load the run again later", and the CLI's
 * one-line messages all ask here.
 */
export type StoreErrorKind =
  /** The database, or the way to it, failed — not the statement: try again later. */
  | "transient"
  /** A deadlock or serialization failure: the transaction may simply run again at once. */
  | "retryable"
  /**
   * The statement was cancelled before it committed — by `statement_timeout`, `lock_timeout`, or an
   * operator's `pg_cancel_backend` (57014, 55P03): it may run again after a pause. (The server
   * ignores a cancel that arrives once the statement is done, while it reads the next message, and
   * holds it off during the commit itself, so a cancelled statement never committed.)
   */
  | "cancelled"
  /** The statement's own data: a constraint violation or a data exception. */
  | "constraint"
  /** Not a Cairn database (no schema), or not a SQLite file at all. */
  | "not-a-cairn-database"
  /** The PostgreSQL database named does not exist. */
  | "missing-database"
  /** The server refused the user or password. */
  | "auth"
  /** The server cannot be reached (refused, unknown host, timed out). */
  | "unreachable"
  /** SQLite cannot read the file read-only (a WAL database without its -wal and -shm files). */
  | "read-only"
  /** Another SQLite error about the file. */
  | "file"
  | "other";

export interface StoreErrorClass {
  kind: StoreErrorKind;
  /** Whether a run that met it is loaded again later instead of failing (see isTransientStoreError). */
  transient: boolean;
  /** The driver's code (SQLSTATE, SQLITE_*, E*), if any. */
  code: string | undefined;
  /** Whose error it is: SQLite's (about the file), or anything else (PostgreSQL, the network). */
  sqlite: boolean;
}

export function classifyStoreError(error: unknown): StoreErrorClass {
  const code = errorCode(error);
  const sqlite = code?.startsWith("SQLITE_") === true;
  if (error instanceof NotACairnDatabaseError) return { kind: "not-a-cairn-database", transient: false, code, sqlite };
  if (code === undefined) {
    // node-postgres reports a socket that closed under a client, and a pool that could not hand
    // out a connection in time, with a plain Error that has no code.
    const message = (error as { message?: unknown } | null)?.message;
    const transient = typeof message === "string" && PG_CONNECTION_MESSAGES.some((pattern) => pattern.test(message));
    return { kind: transient ? "transient" : "other", transient, code, sqlite };
  }
  if (isStaleStatementError(error)) return { kind: "transient", transient: true, code, sqlite };
  const kind = kindOf(code);
  return { kind, transient: kind === "transient" || (kind === "unreachable" && code !== "ENOTFOUND"), code, sqlite };
}

/**
 * Errors that say the database (or the way to it) failed, not the statement: a connection reset,
 * a server shutting down, a locked SQLite file, a full disk. A run that meets one is loaded again
 * later instead of recording a failure its code never caused.
 */
export function isTransientStoreError(error: unknown): boolean {
  return classifyStoreError(error).transient;
}

/**
 * PostgreSQL refused a statement this session prepared earlier because its result has changed
 * since (0A000 "cached plan must not change result type", raised where the server revalidates a
 * cached plan): another process added a column to a table the statement reads with `*` — a newer
 * version's migration in a rolling upgrade. The statement did not run, and the session would refuse
 * it on every use: the error is transient, and a session that met it is dropped (HeldClient,
 * inTransaction; the pool drops a connection that failed a `pool.query` itself), so the next try
 * prepares the statement afresh. Cairn's own statements name their columns (RUN_COLUMNS) and never
 * meet it.
 */
export function isStaleStatementError(error: unknown): boolean {
  if (errorCode(error) !== "0A000") return false;
  const { routine, message } = error as { routine?: unknown; message?: unknown };
  // `routine` is the server's function, the same in every language; the message is English only.
  return routine === "RevalidateCachedQuery" || (typeof message === "string" && message.includes("cached plan must not change result type"));
}

/** A deadlock or serialization failure: the transaction that met it may simply run again. */
export function isRetryableStoreError(error: unknown): boolean {
  return classifyStoreError(error).kind === "retryable";
}

/** A statement cancelled before it committed (statement or lock timeout, an operator): it may run again after a pause. */
export function isCancelledStoreError(error: unknown): boolean {
  return classifyStoreError(error).kind === "cancelled";
}

/**
 * Whether a refusal is the database's condition rather than the data written: any PostgreSQL
 * SQLSTATE or SQLite code outside the data classes ("constraint") — a statement cancelled (by an
 * operator, `statement_timeout`, `lock_timeout`: 57014, 55P03), a database gone read-only (a
 * failover, `default_transaction_read_only`: 25006), privileges revoked (42501), a disk full, a
 * deadlock retried out — as well as every transient error. It lasts as long as the condition does,
 * and says nothing against the run whose writes it refused. An error without a driver's code (one
 * of Cairn's own, a value the codec refused) is the data's, as is a trigger's refusal.
 */
export function isDatabaseCondition(error: unknown): boolean {
  const { kind, code, sqlite } = classifyStoreError(error);
  if (kind === "constraint") return false;
  if (kind === "transient" || kind === "retryable" || kind === "cancelled" || sqlite) return true;
  // A SQLSTATE, or a system error of the socket's (ECONNRESET and the like); not CAIRN_* nor ERR_*.
  return code !== undefined && (/^[0-9A-Z]{5}$/.test(code) || /^E[A-Z]+$/.test(code));
}

/** PostgreSQL refused the role the statement (SQLSTATE 42501, insufficient_privilege): asking again will not help. */
export function isPermissionError(error: unknown): boolean {
  return errorCode(error) === "42501";
}

/** The commit's own fault (its data broke a constraint): it fails alone, the batch goes on. */
export function isConstraintError(error: unknown): boolean {
  return classifyStoreError(error).kind === "constraint";
}

function kindOf(code: string): StoreErrorKind {
  if (code === "28P01" || code === "28000") return "auth";
  if (code === "3D000") return "missing-database";
  if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "ETIMEDOUT" || code === "EHOSTUNREACH") return "unreachable";
  if (code === "SQLITE_NOTADB") return "not-a-cairn-database";
  if (code.startsWith("SQLITE_READONLY")) return "read-only";
  if (code === "40P01" || code === "40001") return "retryable";
  if (code === "57014" || code === "55P03") return "cancelled";
  // SQLSTATE classes 22 (data exception) and 23 (integrity constraint violation).
  // ...as well as 54000 (program_limit_exceeded: a value too large for its index row, say) and
  // P0001 (a trigger's RAISE EXCEPTION refusing the row, as SQLite's RAISE below).
  if (/^2[23][0-9A-Z]{3}$/.test(code) || code === "54000" || code === "P0001") return "constraint";
  // SQLite's: a constraint (primary key, unique, check, a trigger's RAISE), a value too large, a type refused.
  if (code.startsWith("SQLITE_CONSTRAINT") || code === "SQLITE_TOOBIG" || code === "SQLITE_MISMATCH") return "constraint";
  if (
    code.startsWith("08") || // PostgreSQL connection exceptions
    code.startsWith("57P") || // admin shutdown, crash shutdown, cannot connect now
    code === "53300" || // too many connections
    // A session that may not write (25006): connected to a standby (a failover's old primary), or
    // opened while `default_transaction_read_only` was on — which it keeps for its lifetime. The
    // session is dropped (HeldClient, inTransaction, the pool's own query); a new one may write.
    code === "25006" ||
    code === "CAIRN_NO_ANSWER" || // a connection dropped for not answering (answer-watch.ts)
    code === "ECONNRESET" ||
    code === "EPIPE" ||
    code === "ENETUNREACH" ||
    code === "SQLITE_BUSY" ||
    code === "SQLITE_LOCKED" ||
    code === "SQLITE_FULL" ||
    code.startsWith("SQLITE_IOERR")
  ) {
    return "transient";
  }
  if (code.startsWith("SQLITE_")) return "file";
  return "other";
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

const PG_CONNECTION_MESSAGES = [
  /^Connection terminated/,
  /not queryable/,
  /^timeout exceeded when trying to connect/,
  /^Client was closed and is not queryable/,
];
