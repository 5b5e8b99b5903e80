import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import pg from "pg";

/**
 * The backend matrix: every storage test body runs once per backend, against a real database — a
 * fresh SQLite file, or a fresh PostgreSQL database on the server named by CAIRN_TEST_POSTGRES_URL.
 */
export interface Backend {
  name: "sqlite" | "postgres";
  /** A new, empty database for one test: a file path or a postgres:// URL. */
  freshDatabase(): Promise<string>;
}

const sqlite: Backend = {
  name: "sqlite",
  async freshDatabase() {
    return join(mkdtempSync(join(tmpdir(), "cairn-test-")), "cairn.db");
  },
};

const postgresUrl = process.env.CAIRN_TEST_POSTGRES_URL;

const postgres: Backend = {
  name: "postgres",
  async freshDatabase() {
    const name = `cairn_t_${randomUUID().replaceAll("-", "").slice(0, 16)}`;
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
