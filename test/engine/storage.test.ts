import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("storage semantics on $name", (backend) => {
  const env = cairnFactory(backend);

  it("commits a transactional step's own SQL with its checkpoint, and rolls both back on error", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("ledger", async (ctx, amount: number) => {
      await ctx.transaction("create", (sql) => sql.execute("CREATE TABLE IF NOT EXISTS ledger (id TEXT PRIMARY KEY, amount INTEGER)"));
      const inserted = await ctx.transaction("credit", async (sql) => {
        await sql.execute("INSERT INTO ledger (id, amount) VALUES ($1, $2)", [ctx.runId, amount]);
        const rows = await sql.query<{ amount: number }>("SELECT amount FROM ledger WHERE id = $1", [ctx.runId]);
        return Number(rows[0]!.amount);
      });
      const failure = await ctx
        .transaction("half", async (sql) => {
          await sql.execute("INSERT INTO ledger (id, amount) VALUES ($1, $2)", [`${ctx.runId}-half`, 1]);
          throw new Error("changed my mind");
        })
        .catch((e: Error) => e.message);
      return { inserted, failure };
    });
    await cairn.launch();
    expect(await (await wf.start(7, { id: "t1" })).result()).toEqual({ inserted: 7, failure: "changed my mind" });
    const rows = await storeOf(cairn).query("SELECT id, amount FROM ledger ORDER BY id");
    expect(rows.rows.map((r) => [r.id, Number(r.amount)])).toEqual([["t1", 7]]);
    const journal = await storeOf(cairn).loadJournal("t1");
    expect(journal.map((s) => [s.name, s.kind, s.status])).toEqual([
      ["create", "transaction", "succeeded"],
      ["credit", "transaction", "succeeded"],
      ["half", "transaction", "failed"],
    ]);
  });

  it("keeps a transaction usable after a statement the body catches, on both backends", async () => {
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("upsert", async (ctx) => {
      await ctx.transaction("create", (sql) => sql.execute("CREATE TABLE IF NOT EXISTS counters (id TEXT PRIMARY KEY, n INTEGER)"));
      await ctx.transaction("seed", (sql) => sql.execute("INSERT INTO counters (id, n) VALUES ('a', 1)"));
      return ctx.transaction("bump", async (sql) => {
        try {
          await sql.execute("INSERT INTO counters (id, n) VALUES ('a', 1)");
        } catch {
          await sql.execute("UPDATE counters SET n = n + 1 WHERE id = 'a'");
        }
        const rows = await sql.query<{ n: number }>("SELECT n FROM counters WHERE id = 'a'");
        return Number(rows[0]!.n);
      });
    });
    await cairn.launch();
    expect(await (await wf.start(undefined)).result()).toBe(2);
  });

  it("stores a value that many steps return once (content addressing)", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const big = "x".repeat(50_000);
    const wf = cairn.workflow("repeat", async (ctx) => {
      for (let i = 0; i < 100; i++) await ctx.step(`s${i}`, () => ({ big }));
      return "ok";
    });
    await cairn.launch();
    await (await wf.start(undefined, { id: "repeat" })).result();
    const payloads = await storeOf(cairn).query("SELECT count(*) AS n, sum(size) AS bytes FROM cairn_payloads");
    expect(Number(payloads.rows[0]!.n)).toBe(1);
    expect(Number(payloads.rows[0]!.bytes)).toBeLessThan(51_000);
    const steps = await storeOf(cairn).query(
      "SELECT count(DISTINCT output_hash) AS n FROM cairn_steps WHERE run_id = 'repeat' AND output_hash IS NOT NULL",
    );
    expect(Number(steps.rows[0]!.n)).toBe(1);
  });

  it("recovers only runs of its own application version unless told otherwise", async () => {
    const db = await env.database();
    const v1 = env.cairn(db, { appVersion: "v1" });
    const run = await v1.workflow("versioned", async () => "v1 ran").start(undefined, { id: "old" });
    expect(run.id).toBe("old");
    const v2 = env.cairn(db, { appVersion: "v2" });
    v2.workflow("versioned", async () => "v2 ran");
    await v2.launch();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await v2.run("old").status()).status).toBe("enqueued");
    const any = env.cairn(db, { appVersion: "v2", recoverAllVersions: true });
    any.workflow("versioned", async () => "any ran");
    await any.launch();
    expect(await any.run("old").result()).toBe("any ran");
    expect((await storeOf(any).getRun("old"))?.appVersion).toBe("v1");
  });

  it("lets in-flight runs keep the old path with ctx.patched while new runs take the new one", async () => {
    const db = await env.database();
    const old = env.cairn(db);
    const before = old.workflow("evolving", async (ctx) => {
      await ctx.step("first", () => 1);
      await ctx.recv("continue");
      return ctx.step("old-tail", () => "old path");
    });
    await old.launch();
    await before.start(undefined, { id: "inflight" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await old.shutdown();

    const next = env.cairn(db);
    const wf = next.workflow("evolving", async (ctx) => {
      await ctx.step("first", () => 1);
      if (await ctx.patched("skip-wait")) return ctx.step("new-tail", () => "new path");
      await ctx.recv("continue");
      return ctx.step("old-tail", () => "old path");
    });
    await next.launch();
    await next.send("inflight", "continue", null);
    expect(await next.run("inflight").result()).toBe("old path");
    expect(await (await wf.start(undefined, { id: "fresh" })).result()).toBe("new path");
    const kinds = (await storeOf(next).loadJournal("fresh")).map((s) => s.kind);
    expect(kinds).toEqual(["step", "patch", "step"]);
  });
});
