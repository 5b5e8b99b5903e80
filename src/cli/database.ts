import { existsSync, statSync } from "node:fs";
import { Cairn } from "../index.js";
import { NotACairnDatabaseError } from "../errors.js";
import { openStore } from "../store/open-store.js";
import { classifyStoreError } from "../store/store-errors.js";
import type { Store } from "../store/store.js";
import { stringOption, type ParsedArgs } from "./args.js";
import { CliError, oneLine } from "./cli-error.js";

/** `--database`, else $CAIRN_DATABASE, else `cairn.db` (the same default as `new Cairn()`). */
export function databaseOf(args: ParsedArgs): string {
  const given = stringOption(args, "database");
  if (given === "") throw new CliError("--database is empty", "give a SQLite file path or a postgres:// URL");
  return given ?? nonEmpty(process.env.CAIRN_DATABASE) ?? "cairn.db";
}

export function isPostgres(database: string): boolean {
  return /^postgres(ql)?:\/\//i.test(database);
}

/** The database as it may be printed: a URL without its password. */
export function displayName(database: string): string {
  if (!isPostgres(database)) return database;
  try {
    const url = new URL(database);
    if (url.password !== "") url.password = "***";
    return url.toString();
  } catch {
    return "the PostgreSQL database";
  }
}

/**
 * Opens `database` read-only and checks it holds Cairn's schema. Never creates anything: a
 * missing SQLite file is an error here, not a new empty database.
 */
export async function openReadStore(database: string): Promise<Store> {
  if (!isPostgres(database)) {
    if (!existsSync(database)) {
      throw new CliError(`no database at ${database}`, "pass --database <path|url> or set CAIRN_DATABASE (cairn never creates one to read it)");
    }
    if (statSync(database).isDirectory()) throw new CliError(`${database} is a directory`, "pass the path of the database file with --database");
  }
  let store: Store;
  try {
    store = openStore(database, { readonly: true });
  } catch (error) {
    throw openFailure(error, database);
  }
  try {
    await store.assertCairnDatabase();
  } catch (error) {
    await store.close().catch(() => undefined);
    throw openFailure(error, database);
  }
  return store;
}

/** Runs `body` with a read-only store and closes it after. */
export async function withReadStore<T>(database: string, body: (store: Store) => Promise<T>): Promise<T> {
  const store = await openReadStore(database);
  try {
    return await body(store);
  } finally {
    await store.close();
  }
}

/**
 * Runs `body` with a Cairn that is a client, not an executor: it is never launched, so it claims
 * no runs; the process executing a run picks up what the client wrote at its next poll (or at once,
 * on PostgreSQL, through its wake-up channel). The database is checked read-only first, because a
 * Cairn migrates its database on first use and would otherwise turn any file into a Cairn database.
 */
export async function withClient<T>(database: string, body: (cairn: Cairn) => Promise<T>): Promise<T> {
  await (await openReadStore(database)).close();
  const cairn = new Cairn({ database, onError: () => undefined });
  try {
    return await body(cairn);
  } finally {
    await cairn.shutdown();
  }
}

/** Maps what goes wrong opening a database (as the store classifies it) to one line that says what to do. */
function openFailure(error: unknown, database: string): Error {
  if (error instanceof NotACairnDatabaseError) return error;
  const { kind, code, sqlite } = classifyStoreError(error);
  const message = error instanceof Error && error.message !== "" ? oneLine(error.message) : String(code ?? error);
  const name = displayName(database);
  switch (kind) {
    case "not-a-cairn-database":
      return new CliError(`${name} is not a Cairn database (it is not an SQLite file at all)`, "point --database at the file your application uses");
    case "read-only":
      return new CliError(
        `cannot read ${name}: ${message} (a database in WAL mode needs its -wal and -shm files, which SQLite creates next to it)`,
        "run as a user who may write the file's directory, or open it once as one so the files exist",
      );
    case "unreachable":
      return new CliError(`cannot connect to PostgreSQL at ${name} (${String(code)})`, "is the server running? check the URL given to --database");
    case "missing-database":
      return new CliError(`${name}: ${message}`, "create it, or check the database name in the URL");
    case "auth":
      return new CliError(`${name}: ${message}`, "check the user and password in the URL");
  }
  if (sqlite) return new CliError(`cannot read ${name}: ${message}`, "check the path given to --database");
  return new CliError(`cannot open ${name}: ${message}`, "check --database");
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === "" ? undefined : value;
}
