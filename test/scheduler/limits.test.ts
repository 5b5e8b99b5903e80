import { describe, expect, it } from "vitest";
import type { RunHandle } from "../../src/index.js";
import { InvalidSpecError } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { runtimeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { Ledger } from "./ledger.js";

// Every queue limit, checked against a ledger of when each run worked (ledger.ts), on both backends.
describe.each(BACKENDS)("queue limits on $name", (backend) => {
  const env = cairnFactory(backend);

  /** `count` executors (Cairns) on one database, each declaring `queue` and the ledger's workflow. */
  async function fleet(count: number, queue: Parameters<ReturnType<typeof env.cairn>["queue"]>[1], workMs: number, options = {}) {
    const db = await env.database();
    const ledger = new Ledger();
    const cairns = Array.from({ length: count }, (_, i) => {
      const cairn = env.cairn(db, { pollIntervalMs: 50, ...options });
      cairn.queue("q", queue);
      return { cairn, job: ledger.workflow(cairn, "job", `e${i}`, workMs) };
    });
    for (const { cairn } of cairns) await cairn.launch();
    return { db, ledger, cairns };
  }

  async function enqueueAll(job: Awaited<ReturnType<typeof fleet>>["cairns"][number]["job"], inputs: { key?: string }[], options = {}) {
    const handles: RunHandle<unknown>[] = [];
    for (const input of inputs) handles.push(await job.enqueue("q", input, options));
    return Promise.all(handles.map((h) => h.result()));
  }

  it("global concurrency: never more than `concurrency` runs of the queue at once, across executors", async () => {
    const { ledger, cairns } = await fleet(2, { concurrency: 3 }, 40);
    await enqueueAll(
      cairns[0]!.job,
      Array.from({ length: 12 }, () => ({})),
    );
    expect(ledger.entries).toHaveLength(12);
    expect(ledger.maxOverlap()).toBeLessThanOrEqual(3);
    expect(ledger.maxOverlap()).toBeGreaterThanOrEqual(2);
  });

  it("per-executor concurrency: never more than `workerConcurrency` on one executor", async () => {
    const { ledger, cairns } = await fleet(2, { workerConcurrency: 1 }, 40);
    await enqueueAll(
      cairns[0]!.job,
      Array.from({ length: 8 }, () => ({})),
    );
    for (const executor of ["e0", "e1"]) expect(ledger.maxOverlap((e) => e.executor === executor)).toBe(1);
    // Both served: one executor alone could not have run two at once.
    expect(new Set(ledger.entries.map((e) => e.executor)).size).toBe(2);
  });

  it("per-key concurrency: one run per partition key at once, keys side by side", async () => {
    const { ledger, cairns } = await fleet(1, { partitionBy: { concurrency: 1 } }, 30);
    const inputs = Array.from({ length: 9 }, (_, i) => ({ key: ["a", "b", "c"][i % 3]! }));
    const handles: RunHandle<unknown>[] = [];
    for (const input of inputs) handles.push(await cairns[0]!.job.enqueue("q", input, { partitionKey: input.key }));
    await Promise.all(handles.map((h) => h.result()));
    for (const key of ["a", "b", "c"]) expect(ledger.maxOverlap((e) => e.key === key)).toBe(1);
    expect(ledger.maxOverlap()).toBeGreaterThanOrEqual(2);
  });

  it("rate limit: at most `limit` dispatches in any window of `periodMs`", async () => {
    const { cairns } = await fleet(2, { rateLimit: { limit: 2, periodMs: 250 } }, 1);
    await enqueueAll(
      cairns[0]!.job,
      Array.from({ length: 6 }, () => ({})),
    );
    const { rows } = await cairns[0]!.cairn.query("SELECT dispatched_at FROM cairn_queue_runs ORDER BY dispatched_at");
    const times = rows.map((r) => Number(r.dispatched_at));
    for (let i = 2; i < times.length; i++) expect(times[i]! - times[i - 2]!).toBeGreaterThanOrEqual(250);
  });

  it("priorities order dispatch: lower first", async () => {
    const db = await env.database();
    const ledger = new Ledger();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    cairn.queue("q", { concurrency: 1, priority: true });
    const job = ledger.workflow(cairn, "job", "e0", 1);
    const priorities = [5, 1, 4, 0, 3, 2];
    // Enqueued before the executor starts: every run waits, and dispatch alone decides the order.
    const handles: RunHandle<unknown>[] = [];
    for (const priority of priorities) handles.push(await job.enqueue("q", { key: String(priority) }, { priority }));
    await cairn.launch();
    await Promise.all(handles.map((h) => h.result()));
    expect(ledger.entries.map((e) => e.key)).toEqual(["0", "1", "2", "3", "4", "5"]);
  });

  it("dedup: a second enqueue with a live dedupKey returns the existing run; a finished one frees the key", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    cairn.queue("q");
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const job = cairn.workflow("job", async (ctx, n: number) => ctx.step("wait", async () => (await gate, n)));
    await cairn.launch();
    const first = await job.enqueue("q", 1, { dedupKey: "order-7" });
    const second = await job.enqueue("q", 2, { dedupKey: "order-7" });
    expect(second.id).toBe(first.id);
    release();
    expect(await second.result()).toBe(1);
    const third = await job.enqueue("q", 3, { dedupKey: "order-7" });
    expect(third.id).not.toBe(first.id);
    expect(await third.result()).toBe(3);
  });

  it("delayed start on the Cairn's clock: delayMs and runAt wait for the ManualClock", async () => {
    const db = await env.database();
    const clock = new ManualClock();
    const cairn = env.cairn(db, { clock, pollIntervalMs: 20 });
    cairn.queue("q");
    const job = cairn.workflow("job", async (ctx, n: number) => ctx.step("s", async () => n));
    await cairn.launch();
    const later = await job.enqueue("q", 1, { delayMs: 10_000 });
    const at = await job.enqueue("q", 2, { runAt: clock.now() + 20_000 });
    await new Promise((resolve) => setTimeout(resolve, 200)); // several polls: nothing may start
    expect((await later.status()).status).toBe("enqueued");
    clock.advance(10_000);
    expect(await later.result()).toBe(1);
    expect((await at.status()).status).toBe("enqueued");
    clock.advance(10_000);
    expect(await at.result()).toBe(2);
  });

  it("fairness: a light tenant's runs are not starved by a heavy tenant's backlog", async () => {
    const db = await env.database();
    const ledger = new Ledger();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    cairn.queue("q", { concurrency: 2, partitionBy: { key: (input) => (input as { key: string }).key } });
    const job = ledger.workflow(cairn, "job", "e0", 5);
    // FAIRNESS_HEAVY scales the heavy tenant's backlog (the figure is 10,000).
    const heavy = Number(process.env.FAIRNESS_HEAVY ?? "40");
    for (let i = 0; i < heavy; i += 100) {
      await Promise.all(Array.from({ length: Math.min(100, heavy - i) }, () => job.enqueue("q", { key: "heavy" })));
    }
    const light: RunHandle<unknown>[] = [];
    for (let i = 0; i < 3; i++) light.push(await job.enqueue("q", { key: "light" }));
    await cairn.launch();
    await Promise.all(light.map((h) => h.result()));
    // Dispatch serves the tenant running the fewest: the light runs alternate with the heavy ones at
    // the head instead of waiting behind all of them.
    const { rows } = await cairn.query(
      "SELECT COUNT(*) AS n FROM cairn_queue_runs t JOIN cairn_runs r ON r.id = t.run_id WHERE t.dispatched_at IS NOT NULL AND t.partition_key = 'heavy'",
    );
    expect(Number(rows[0]!.n)).toBeLessThan(8);
  });

  it("a queued run cancelled before its dispatch leaves the queue; resumed, it waits for the queue again", async () => {
    const db = await env.database();
    const ledger = new Ledger();
    const cairn = env.cairn(db, { pollIntervalMs: 50 });
    cairn.queue("q", { concurrency: 1, rateLimit: { limit: 1, periodMs: 60_000 } });
    const job = ledger.workflow(cairn, "job", "e0", 1);
    const cancelled = await job.enqueue("q", { key: "cancelled" });
    await cairn.cancel(cancelled.id);
    const kept = await job.enqueue("q", { key: "kept" });
    await cairn.launch();
    // The rate limit (1 a minute) is spent on the run that ran, not on the cancelled one.
    await kept.result();
    const { rows } = await cairn.query("SELECT policy FROM cairn_queue_runs WHERE run_id = $1", [cancelled.id]);
    expect(rows[0]!.policy).toBe("cancelled");
    expect(await cairn.resume(cancelled.id)).toBe(true);
    const { rows: back } = await cairn.query("SELECT dispatched_at FROM cairn_queue_runs WHERE run_id = $1", [cancelled.id]);
    expect(back[0]!.dispatched_at).toBeNull();
    expect((await cancelled.status()).status).toBe("enqueued"); // held by the rate limit, not claimed around it
    expect(ledger.entries.map((e) => e.key)).toEqual(["kept"]);
  });

  it("bad input at declaration and enqueue: InvalidSpecError naming the field and the value", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const job = cairn.workflow("job", async () => 1);
    const refuse = (fn: () => unknown, field: string) => {
      try {
        fn();
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidSpecError);
        expect((error as InvalidSpecError).field).toBe(field);
        return;
      }
      throw new Error(`expected InvalidSpecError on ${field}`);
    };
    refuse(() => cairn.queue("a", { concurrency: -1 }), "concurrency");
    refuse(() => cairn.queue("b", { concurrency: 1.5 }), "concurrency");
    refuse(() => cairn.queue("c", { workerConcurrency: 0 }), "workerConcurrency");
    refuse(() => cairn.queue("d", { rateLimit: { limit: 2, periodMs: -5 } }), "rateLimit.periodMs");
    refuse(() => cairn.queue("e", { partitionBy: { concurrency: 2.5 } }), "partitionBy.concurrency");
    refuse(() => cairn.queue("f", { policy: "random" as never }), "policy");
    refuse(() => cairn.queue("g", { policy: { sql: "DELETE FROM cairn_runs" } }), "policy.sql");
    refuse(() => cairn.queue("h", { policy: { sql: "SELECT run_id, executor_id FROM candidates; SELECT 1" } }), "policy.sql");
    refuse(() => cairn.queue("i", { concurrency: 2, burst: 3 } as never), "burst");
    cairn.queue("ok");
    refuse(() => cairn.queue("ok"), "name");
    await expect(job.enqueue("nope", undefined)).rejects.toMatchObject({ name: "InvalidSpecError", field: "queue", value: "nope" });
    await expect(job.enqueue("ok", undefined, { priority: 1 })).rejects.toMatchObject({ field: "priority" });
    await expect(job.enqueue("ok", undefined, { delayMs: -1 })).rejects.toMatchObject({ field: "delayMs" });
    await expect(job.enqueue("ok", undefined, { delayMs: 1, runAt: 5 })).rejects.toMatchObject({ field: "delayMs" });
    // Nothing was stored by the refusals.
    expect((await cairn.query("SELECT COUNT(*) AS n FROM cairn_queue_runs")).rows[0]!.n).toBe(0);
    expect(runtimeOf(cairn)).toBeDefined();
  });
});
