import pg from "pg";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// PostgreSQL only: the default isolation level is a setting of its server and databases.
const postgres = BACKENDS.find((backend) => backend.name === "postgres");

describe.skipIf(postgres === undefined)("a PostgreSQL database whose default isolation is above READ COMMITTED", () => {
  const env = cairnFactory(postgres!);

  for (const isolation of ["serializable", "repeatable read"]) {
    it(`(${isolation}) lets two processes launch together, and runs across them as under READ COMMITTED`, async () => {
      const db = await env.database();
      const name = new URL(db).pathname.slice(1);
      const admin = new pg.Client({ connectionString: db });
      await admin.connect();
      try {
        await admin.query(`ALTER DATABASE ${name} SET default_transaction_isolation = '${isolation}'`);
      } finally {
        await admin.end();
      }
      const apps = [0, 1].map(() => {
        const cairn = env.cairn(db, { pollIntervalMs: 50 });
        cairn.queue("work", { concurrency: 4 });
        const double = cairn.workflow("double", async (ctx, n: number) => ctx.step("double", () => 2 * n));
        const parent = cairn.workflow("parent", async (ctx, n: number) => {
          const one = await ctx.step("one", () => n + 1);
          await ctx.sleep("nap", 20);
          const child = await (await ctx.child(double, one)).result();
          await ctx.setEvent("ready", child);
          return child + ((await ctx.recv<number>("bonus", { timeoutMs: 10_000 })) ?? 0);
        });
        return { cairn, parent };
      });
      // Before, the second to take the migrations' lock read the schema on a snapshot from before the
      // first committed it, and created the tables again: "relation cairn_runs already exists".
      await Promise.all(apps.map((app) => app.cairn.launch()));
      const runs = await Promise.all(Array.from({ length: 20 }, (_, n) => (n % 2 === 0 ? apps[0]!.parent.start(n) : apps[1]!.parent.enqueue("work", n))));
      // Each run as it gets there (in the order of the list, a run queued behind four others waiting here would wait for them).
      await Promise.all(
        runs.map(async (run) => {
          await apps[1]!.cairn.getEvent(run.id, "ready", { timeoutMs: 10_000 });
          await apps[0]!.cairn.send(run.id, "bonus", 1);
        }),
      );
      expect(await Promise.all(runs.map((run) => run.result()))).toEqual(Array.from({ length: 20 }, (_, n) => 2 * (n + 1) + 1));
    });
  }
});
