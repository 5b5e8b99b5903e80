import { PostgresStore } from "./postgres/postgres-store.js";
import { SqliteStore } from "./sqlite/sqlite-store.js";
import type { Store } from "./store.js";

export interface OpenStoreOptions {
  /** Open without creating or writing (the CLI's read commands). */
  readonly?: boolean;
  /** SQLite only: "FULL" (the default) survives power loss; "NORMAL" survives process crashes only. */
  synchronous?: "FULL" | "NORMAL" | "OFF";
  /** PostgreSQL only: see PostgresStoreOptions.answerTimeoutMs. */
  answerTimeoutMs?: number;
}

/**
 * Opens the system database named by `database`: a `postgres://` or `postgresql://` URL opens
 * PostgreSQL; anything else is the path of a SQLite file.
 */
export function openStore(database: string, options: OpenStoreOptions = {}): Store {
  if (/^postgres(ql)?:\/\//i.test(database)) {
    return new PostgresStore(database, {
      ...(options.readonly ? { readonly: true } : {}),
      ...(options.answerTimeoutMs === undefined ? {} : { answerTimeoutMs: options.answerTimeoutMs }),
    });
  }
  return new SqliteStore(database, options);
}
