import pg from "pg";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// PostgreSQL only: `idle_session_timeout`, a server setting (14+) that ends sessions idle too long.
const postgres = BACKENDS.find((backend) => backend.name === "postgres");

describe.skipIf(postgres === undefined)("a PostgreSQL server that ends idle sessions (idle_session_timeout)", () => {
  const env = cairnFactory(postgres!);

  it("does not end the executor's listening session: the executor keeps its identity and its runs", async () => {
    const db = await env.database();
    const name = new URL(db).pathname.slice(1);
    const admin = new pg.Client({ connectionString: db });
    await admin.connect();
    try {
      // Every session opened from now on is ended after 300 ms idle.
      await admin.query(`ALTER DATABASE ${name} SET idle_session_timeout = '300ms'`);
      const cairn = env.cairn(db);
      const nap = cairn.workflow("nap", async (ctx) => {
        await ctx.sleep("long", 2_000);
        return ctx.step("after", () => "rested");
      });
      await cairn.launch();
      const run = await nap.start(undefined, { id: "nap" });
      // Before, the listening session was ended every 300 ms, and the executor re-registered under a
      // new identity each time (letting go of its runs to claim them back): a dozen in 2 s.
      const identities = new Set<string>();
      const watching = setInterval(() => {
        admin.query<{ id: string }>("SELECT id FROM cairn_executors").then(
          ({ rows }) => rows.forEach((row) => identities.add(row.id)),
          () => undefined,
        );
      }, 100);
      try {
        expect(await run.result()).toBe("rested");
      } finally {
        clearInterval(watching);
      }
      expect(identities.size).toBe(1);
    } finally {
      await admin.end();
    }
  });
});
