import { randomBytes } from "node:crypto";
import pg from "pg";

/**
 * Fresh PostgreSQL databases for the cairn-postgres arm: one per pass, created on the server the
 * experiment is given and dropped when the pass is over (its SQLite twins stay in --out).
 */

/** Why the server cannot be used, or undefined when it answers. */
export async function postgresUnreachable(url: string, timeoutMs = 3000): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT 1");
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message || error.name : String(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface ScratchDatabase {
  url: string;
  drop(): Promise<void>;
}

export async function freshDatabase(serverUrl: string): Promise<ScratchDatabase> {
  const name = `cairn_experiment_${randomBytes(5).toString("hex")}`;
  await admin(serverUrl, (client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    // FORCE ends sessions a killed worker left behind, so the drop never waits on them.
    drop: () => admin(serverUrl, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
  };
}

async function admin<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
