import { randomBytes } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import type { ScratchSpace } from "./scratch.js";

/**
 * Before the first test file: the run's scratch space (test/scratch.ts) and the backend matrix's
 * gate — with CAIRN_REQUIRE_POSTGRES=1 (as .ci/run sets), a run without a reachable PostgreSQL
 * fails instead of quietly testing SQLite alone. After the last: the scratch space is removed.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const run = randomBytes(4).toString("hex");
  const root = mkdtempSync(join(tmpdir(), `cairn-test-${run}-`));
  // Crash and fault workers may run as another user; the folders inside are still made per test.
  chmodSync(root, 0o755);
  const databasePrefix = `cairn_t_${run}_`;
  const space: ScratchSpace = { root, databasePrefix };
  project.provide("cairnScratch", space);

  const url = process.env.CAIRN_TEST_POSTGRES_URL;
  const teardown = async (): Promise<void> => {
    rmSync(root, { recursive: true, force: true });
    if (url !== undefined && url !== "") await dropDatabases(url, databasePrefix);
  };
  if (url === undefined || url === "") {
    if (process.env.CAIRN_REQUIRE_POSTGRES === "1") {
      rmSync(root, { recursive: true, force: true });
      throw new Error("CAIRN_REQUIRE_POSTGRES=1 but CAIRN_TEST_POSTGRES_URL is not set: start one with `npm run pg:start`");
    }
    console.warn("[cairn tests] CAIRN_TEST_POSTGRES_URL is not set: PostgreSQL tests are skipped");
    return teardown;
  }
  const pg = (await import("pg")).default;
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.query("SELECT 1");
  } catch (error) {
    rmSync(root, { recursive: true, force: true });
    throw new Error(`cannot reach PostgreSQL at ${url}: ${(error as Error).message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
  return teardown;
}

/** Concurrent DROPs share the checkpoint each one waits for: one at a time would take minutes. */
const DROP_CONCURRENCY = 16;

/**
 * Drops every database this run created. WITH (FORCE): a worker process a test killed, or a Cairn
 * a failed test never shut down, may still hold a session.
 */
async function dropDatabases(url: string, prefix: string): Promise<void> {
  const pg = (await import("pg")).default;
  const list = new pg.Client({ connectionString: url });
  await list.connect();
  let names: string[];
  try {
    const result = await list.query<{ datname: string }>("SELECT datname FROM pg_database WHERE left(datname, length($1)) = $1", [prefix]);
    names = result.rows.map((row) => row.datname);
  } finally {
    await list.end();
  }
  const failures: string[] = [];
  const dropper = async (): Promise<void> => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      for (let name = names.pop(); name !== undefined; name = names.pop()) {
        // The name is ours (the prefix, then hex), so it needs no quoting.
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch((error: Error) => failures.push(`${name}: ${error.message}`));
      }
    } finally {
      await client.end();
    }
  };
  await Promise.all(Array.from({ length: Math.min(DROP_CONCURRENCY, names.length) }, dropper));
  if (failures.length > 0) console.warn(`[cairn tests] could not drop ${failures.length} test databases:\n${failures.join("\n")}`);
}
