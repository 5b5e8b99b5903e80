import pg from "pg";
import { describe, expect, it } from "vitest";
import { durableRun } from "../../src/engine/durable-run.js";
import type { WriteOp } from "../../src/store/store.js";
import { isDatabaseCondition } from "../../src/store/store-errors.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/** A row that collides with itself: whatever commits it breaks a primary key, every time. */
const collidingRows = (id: string): WriteOp[] =>
  [1, 2].map(() => ({
    type: "insert",
    table: "cairn_artifacts",
    values: { id, name: "x", media_type: "text/plain", hash: "h", size: 1, run_id: id, seq: 0, created_at: 0 },
  }));

describe.each(BACKENDS)("a write the database refuses on $name", (backend) => {
  const env = cairnFactory(backend);

  it("fails only its own run (not the others committed with it), and fails it instead of retrying forever", async () => {
    const cairn = env.cairn(await env.database(), { pollIntervalMs: 20 });
    const doomed = cairn.workflow("doomed", async (ctx) =>
      durableRun(ctx).operation({ kind: "step", name: "collide", execute: () => 1, alsoWrite: () => collidingRows(ctx.runId) }),
    );
    const healthy = cairn.workflow("healthy", async (ctx) => {
      let total = 0;
      for (let i = 0; i < 20; i++) total += await ctx.step(`s${i}`, () => i);
      return total;
    });
    await cairn.launch();
    const bad = await doomed.start(undefined, { id: "doomed" });
    const goods = await Promise.all([1, 2, 3].map((i) => healthy.start(undefined, { id: `healthy-${i}` })));
    for (const good of goods) expect(await good.result()).toBe(190);
    const error = (await bad.result().catch((e: unknown) => e)) as Error;
    expect(error.name).toBe("CairnError");
    expect(error.message).toContain("refused the writes of run doomed 5 times");
  });
});

// PostgreSQL only: a condition of the database that refuses some writes for a while (a cancelled
// statement, a read-only database, revoked privileges) is injected with a trigger. SQLite's
// conditions (busy, full, I/O) are transient and covered by the fault tests.
const postgres = BACKENDS.find((backend) => backend.name === "postgres");

describe.skipIf(postgres === undefined)("a refusal that is the database's condition (PostgreSQL)", () => {
  const env = cairnFactory(postgres!);

  it("never fails the run, however many times it comes: the run goes on when the condition ends", async () => {
    const db = await env.database();
    const reported: unknown[] = [];
    const cairn = env.cairn(db, { pollIntervalMs: 20, onError: (error) => reported.push(error) });
    let executed = 0;
    const patient = cairn.workflow("patient", async (ctx) => ctx.step("work", () => ++executed && 42));
    await cairn.launch();
    const sql = new pg.Client({ connectionString: db });
    await sql.connect();
    try {
      // Each run's step rows are refused with its own SQLSTATE while its row is in `refusing`:
      // 57014 (statement_timeout, lock_timeout or an operator's pg_cancel_backend) and 25006 (a
      // database gone read-only, as a failover leaves one).
      await sql.query(`CREATE TABLE refusing (run_id text PRIMARY KEY, code text NOT NULL)`);
      await sql.query(`INSERT INTO refusing VALUES ('cancelled', '57014'), ('read-only', '25006')`);
      await sql.query(`CREATE FUNCTION refuse_steps() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE c text := (SELECT code FROM refusing WHERE run_id = NEW.run_id);
        BEGIN
          IF c IS NOT NULL THEN RAISE EXCEPTION 'refused by the test (%)', c USING ERRCODE = c; END IF;
          RETURN NEW;
        END $$`);
      await sql.query(`CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON cairn_steps FOR EACH ROW EXECUTE FUNCTION refuse_steps()`);
      const runs = await Promise.all(["cancelled", "read-only"].map((id) => patient.start(undefined, { id })));
      // Each is refused (and reported), and refused again after every backoff: 50 + 100 + ... +
      // 1,600 ms is six refusals, past the five after which a run whose data is refused fails.
      await eventually(() => ["cancelled", "read-only"].every((id) => reported.some((e) => String(e).includes(`run ${id}: the database refused`))));
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      for (const run of runs) expect((await run.status()).status).toBe("running");
      await sql.query(`DELETE FROM refusing`);
      for (const run of runs) expect(await run.result()).toBe(42);
      // At least once: the step ran again after each refused commit, and its result is the one committed.
      expect(executed).toBeGreaterThanOrEqual(2 * 6);
      // (Steps of both runs committed in one batch are refused together, with the first row's code.)
      const causes = reported.map((e) => (e as { cause?: { code?: string } }).cause?.code).filter((code) => code !== undefined);
      expect(causes.length).toBeGreaterThan(0);
      expect(causes.every((code) => code === "57014" || code === "25006")).toBe(true);
    } finally {
      await sql.end();
    }
  });
});

describe.skipIf(postgres === undefined)("a commit cancelled by a timeout or an operator (PostgreSQL)", () => {
  const env = cairnFactory(postgres!);

  it("is tried again after a pause: the step's effect is not done twice, and nothing is reported", async () => {
    const db = await env.database();
    const reported: unknown[] = [];
    const cairn = env.cairn(db, { onError: (error) => reported.push(error) });
    let executed = 0;
    const once = cairn.workflow("once", async (ctx) => ctx.step("send-email", () => ++executed));
    await cairn.launch();
    const sql = new pg.Client({ connectionString: db });
    await sql.connect();
    try {
      // The first two writes of the step's row are cancelled (a sequence counts them: it is not
      // rolled back with the statement), as statement_timeout or pg_cancel_backend would cancel them.
      await sql.query(`CREATE SEQUENCE cancels`);
      await sql.query(`CREATE FUNCTION cancel_twice() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF nextval('cancels') <= 2 THEN RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled'; END IF;
          RETURN NEW;
        END $$`);
      await sql.query(`CREATE TRIGGER cancel_twice BEFORE INSERT ON cairn_steps FOR EACH ROW EXECUTE FUNCTION cancel_twice()`);
      expect(await (await once.start(undefined, { id: "once" })).result()).toBe(1);
      expect(executed).toBe(1);
      expect(Number((await sql.query("SELECT last_value FROM cancels")).rows[0].last_value)).toBe(3);
      expect(reported).toEqual([]);
    } finally {
      await sql.end();
    }
  });
});

describe("which refusals are the database's condition, not the data's", () => {
  const error = (code: string | undefined, message = "refused") => Object.assign(new Error(message), code === undefined ? {} : { code });

  it("counts cancelled statements, read-only databases, revoked privileges, resources and transient errors as conditions", () => {
    for (const code of [
      "57014",
      "55P03",
      "25006",
      "42501",
      "53100",
      "53200",
      "58030",
      "XX000",
      "40001",
      "57P01",
      "ECONNRESET",
      "SQLITE_BUSY",
      "SQLITE_READONLY",
      "SQLITE_CORRUPT",
    ]) {
      expect(isDatabaseCondition(error(code)), code).toBe(true);
    }
  });

  it("counts the data's faults, and errors with no driver's code, against the data", () => {
    for (const code of [
      "23505",
      "23502",
      "22001",
      "22021",
      "54000",
      "P0001",
      "SQLITE_CONSTRAINT_PRIMARYKEY",
      "SQLITE_CONSTRAINT_TRIGGER",
      "SQLITE_TOOBIG",
      "CAIRN_ERROR",
      "ERR_INVALID_ARG_TYPE",
      undefined,
    ]) {
      expect(isDatabaseCondition(error(code)), String(code)).toBe(false);
    }
  });
});
