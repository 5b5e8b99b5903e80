import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";

/**
 * Every measurement gets a database nobody has written to: a file in a new temp directory, or a
 * PostgreSQL database created for it and dropped afterwards. A table that already holds the last
 * round's rows (bigger indexes, a checkpoint due) would make rounds unequal.
 */
export interface ScratchDatabase {
  /** What `new Cairn({ database })` takes: a file path or a postgres:// URL. */
  readonly database: string;
  dispose(): Promise<void>;
}

export function scratchSqlite(): ScratchDatabase {
  const dir = mkdtempSync(join(tmpdir(), "cairn-bench-"));
  return {
    database: join(dir, "bench.db"),
    async dispose() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A PostgreSQL server the benchmark may create and drop databases on. */
export class ScratchPostgres {
  private constructor(private readonly adminUrl: string) {}

  /**
   * Connects to `url` (its database is only used to issue CREATE/DROP DATABASE). When the server
   * does not answer within `timeoutMs`, resolves with the reason instead, so the caller can skip it.
   */
  static async connect(url: string, timeoutMs = 3000): Promise<{ server: ScratchPostgres } | { unreachable: string }> {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
    client.on("error", () => undefined);
    try {
      await client.connect();
      await client.query("SELECT 1");
      return { server: new ScratchPostgres(url) };
    } catch (error) {
      return { unreachable: error instanceof Error ? error.message || error.name : String(error) };
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** The server's version string, for the report. */
  async version(): Promise<string> {
    return this.admin(async (client) => {
      const result = await client.query<{ v: string }>("SELECT current_setting('server_version') AS v");
      return result.rows[0]?.v ?? "unknown";
    });
  }

  /**
   * A new database. `durable: false` sets its synchronous_commit to off, so commits return before
   * their WAL is flushed: the engine's cost per step without the disk's (a diagnostic, never a
   * configuration Cairn recommends).
   */
  async fresh(durable = true): Promise<ScratchDatabase> {
    const name = `cairn_bench_${randomBytes(6).toString("hex")}`;
    await this.admin(async (client) => {
      await client.query(`CREATE DATABASE ${name}`);
      if (!durable) await client.query(`ALTER DATABASE ${name} SET synchronous_commit = off`);
    });
    const url = new URL(this.adminUrl);
    url.pathname = `/${name}`;
    return {
      database: url.toString(),
      // FORCE ends sessions a failed measurement left behind, so the drop never waits on them.
      dispose: () => this.admin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => undefined),
    };
  }

  private async admin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: this.adminUrl });
    client.on("error", () => undefined);
    await client.connect();
    try {
      return await fn(client);
    } finally {
      await client.end();
    }
  }
}
