import pg from "pg";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// PostgreSQL only: a server that refuses writes for a while while it answers reads — a failover's
// standby, a maintenance freeze (`default_transaction_read_only`). SQLite's read-only file is a
// start-up error (the CLI's "read-only" kind), not a state a running executor meets.
const postgres = BACKENDS.find((backend) => backend.name === "postgres");

describe.skipIf(postgres === undefined)("a PostgreSQL database that goes read-only for a while", () => {
  const env = cairnFactory(postgres!);

  it("fails no run, and every run finishes once it may write again, on sessions opened while it was read-only as well", async () => {
    const db = await env.database();
    const name = new URL(db).pathname.slice(1);
    const reported: unknown[] = [];
    const cairn = env.cairn(db, { onError: (error) => reported.push(error) });
    const steps = cairn.workflow("steps", async (ctx, n: number) => {
      let sum = 0;
      for (let i = 0; i < 10; i++) {
        sum += await ctx.step(`s${i}`, () => n + i);
        await ctx.sleep(`pause${i}`, 100);
      }
      return sum;
    });
    await cairn.launch();
    const runs = await Promise.all(Array.from({ length: 50 }, (_, n) => steps.start(n, { id: `run-${n}` })));

    // The administrator's connection is to another database: once ours is read-only, so would be a session on it.
    const adminUrl = new URL(db);
    adminUrl.pathname = "/postgres";
    const admin = new pg.Client({ connectionString: adminUrl.toString() });
    await admin.connect();
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Every session from now on is read-only, and it stays so for its lifetime; the sessions
      // Cairn held are ended, so each one it opens meanwhile is one of those.
      await admin.query(`ALTER DATABASE ${name} SET default_transaction_read_only = on`);
      await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, [name]);
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      // A start meanwhile is refused, on a session of the group commit's opened read-only.
      const refusedStart = await steps.start(-1, { id: "while-read-only" }).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect((refusedStart as { code?: string } | undefined)?.code).toBe("25006");
      const refused = reported.filter(
        (error) => (error as { cause?: { code?: string } }).cause?.code === "25006" || (error as { code?: string }).code === "25006",
      );
      expect(refused.length, "the executor met the read-only database").toBeGreaterThan(0);
      for (const run of runs) expect((await run.status()).status).not.toBe("failed");
      await admin.query(`ALTER DATABASE ${name} RESET default_transaction_read_only`);
      // Before, the sessions opened while it was read-only stayed so: this start, and every run's
      // next commit, were refused for as long as the process lived.
      expect(await (await steps.start(100, { id: "after" })).result()).toBe(1045);
      const results = await Promise.all(runs.map((run) => run.result()));
      expect(results).toEqual(Array.from({ length: 50 }, (_, n) => 10 * n + 45));
    } finally {
      await admin.query(`ALTER DATABASE ${name} RESET default_transaction_read_only`).catch(() => undefined);
      await admin.end();
    }
  }, 60_000);
});
