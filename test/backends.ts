import { join } from "node:path";
import pg from "pg";
import { scratchDatabaseName, scratchDir } from "./scratch.js";

/**
 * The backend matrix: every storage test body runs once per backend, against a real database — a
 * fresh SQLite file, or a fresh PostgreSQL database on the server named by CAIRN_TEST_POSTGRES_URL.
 * Both are removed after the test run (see test/scratch.ts).
 */
export interface Backend {
  name: "sqlite" | "postgres";
  /** A new, empty database for one test: a file path or a postgres:// URL. */
  freshDatabase(): Promise<string>;
}

const sqlite: Backend = {
  name: "sqlite",
  async freshDatabase() {
    return join(scratchDir("sqlite-"), "cairn.db");
  },
};

const postgresUrl = process.env.CAIRN_TEST_POSTGRES_URL;

const postgres: Backend = {
  name: "postgres",
  async freshDatabase() {
    const name = scratchDatabaseName();
    const admin = new pg.Client({ connectionString: postgresUrl });
    await admin.connect();
    try {
      await admin.query(`CREATE DATABASE ${name}`);
    } finally {
      await admin.end();
    }
    const url = new URL(postgresUrl!);
    url.pathname = `/${name}`;
    return url.toString();
  },
};

export const BACKENDS: Backend[] = postgresUrl ? [sqlite, postgres] : [sqlite];
