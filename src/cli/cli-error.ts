import { CairnError } from "../errors.js";

/**
 * A failure the CLI reports as one line, `cairn: <what was wrong> — <what to do>`, with exit
 * code 1. Anything a command throws ends up here, through `describeError`.
 */
export class CliError extends Error {
  constructor(
    readonly what: string,
    readonly todo: string,
  ) {
    super(`${what} — ${todo}`);
    this.name = "CliError";
  }
}

/** What to do about a CairnError whose message does not already say. */
const HINTS: Partial<Record<string, string>> = {
  RUN_NOT_FOUND: "list runs with `cairn runs`",
  NOT_A_CAIRN_DATABASE: "point --database at the database your application uses",
  INVALID_SPEC: "see `cairn --help`",
  UNSERIALIZABLE: "send plain JSON",
};

/** The single line printed for `error` (without the `cairn: ` prefix). */
export function describeError(error: unknown): string {
  if (error instanceof CliError) return oneLine(error.message);
  if (error instanceof CairnError) {
    const message = oneLine(error.message);
    if (message.includes(" — ")) return message;
    return `${message} — ${HINTS[error.code] ?? "see `cairn --help`"}`;
  }
  const database = databaseFailure(error);
  if (database !== undefined) return database;
  if (error instanceof Error) {
    return `unexpected ${error.name}: ${oneLine(error.message)} — this is a bug in cairn; please report it with the command you ran`;
  }
  return `unexpected failure: ${oneLine(String(error))} — this is a bug in cairn; please report it with the command you ran`;
}

export function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}

/**
 * What the database says when it cannot do what was asked, for reasons outside cairn: a file the
 * user cannot write, a peer holding SQLite's single write lock, a full disk.
 */
function databaseFailure(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return undefined;
  const message = oneLine(error instanceof Error ? error.message : String(error));
  if (code.startsWith("SQLITE_READONLY")) {
    return `the database is read-only here (${message}) — this command writes; run it as a user who may write the file and its directory (SQLite also writes the -wal and -shm files next to it)`;
  }
  if (code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED")) {
    return (
      `the database stayed locked by another process for the whole wait (${message}) — SQLite has one writer at a time; ` +
      "a process stopped (SIGSTOP, a debugger) inside a write transaction blocks every other; let it continue or end it (fuser <file> finds it)"
    );
  }
  if (code === "SQLITE_FULL") return `the disk is full (${message}) — free some space; nothing was half-written`;
  if (code.startsWith("SQLITE_CANTOPEN") || code === "EACCES" || code === "EPERM") {
    return `cannot open the database file (${message}) — check the path and its permissions`;
  }
  if (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB") {
    return `the database file is damaged or not an SQLite database (${message}) — point --database at your application's file`;
  }
  return undefined;
}
