import { describe, expect, it } from "vitest";
import { InvalidSpecError, RunNotFoundError, type Cairn } from "../../src/index.js";
import { hashText } from "../../src/store/value/index.js";
import type { Store } from "../../src/store/store.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

/** Every table keyed by run id, with its run column. */
const RUN_TABLES: [string, string][] = [
  ["cairn_runs", "id"],
  ["cairn_steps", "run_id"],
  ["cairn_messages", "run_id"],
  ["cairn_events", "run_id"],
  ["cairn_model_calls", "run_id"],
  ["cairn_tool_calls", "run_id"],
  ["cairn_approvals", "run_id"],
  ["cairn_budgets", "run_id"],
  ["cairn_artifacts", "run_id"],
  ["cairn_stream_chunks", "run_id"],
];

async function count(store: Store, sql: string, params: unknown[] = []): Promise<number> {
  const rows = await store.select<{ n: number | string }>(sql, params);
  return Number(rows[0]!.n);
}

async function rowsOf(store: Store, runIds: string[]): Promise<number> {
  let total = 0;
  for (const [table, column] of RUN_TABLES) {
    for (const id of runIds) total += await count(store, `SELECT count(*) AS n FROM ${table} WHERE ${column} = $1`, [id]);
  }
  return total;
}

/** A journal whose every hashed output resolves: what a fork needs after its origin is deleted. */
async function expectWholeJournal(store: Store, runId: string): Promise<void> {
  const journal = await store.loadJournal(runId);
  expect(journal.length).toBeGreaterThan(0);
  for (const step of journal) if (step.outputHash !== null) expect(step.output, `${runId} seq ${step.seq}`).not.toBeNull();
  const run = await store.getRun(runId);
  expect(run!.input).not.toBe("null");
}

/** Every hash a row names resolves to a payload. */
async function expectNoDanglingHash(store: Store): Promise<void> {
  for (const [table, column] of [
    ["cairn_runs", "input_hash"],
    ["cairn_runs", "output_hash"],
    ["cairn_steps", "output_hash"],
    ["cairn_events", "value_hash"],
    ["cairn_messages", "body_hash"],
  ]) {
    const dangling = await count(
      store,
      `SELECT count(*) AS n FROM ${table} t WHERE t.${column} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM cairn_payloads p WHERE p.hash = t.${column})`,
    );
    expect(dangling, `${table}.${column}`).toBe(0);
  }
}

const SHARED = "s".repeat(400);

function register(cairn: Cairn) {
  const big = cairn.workflow("big", async (ctx, tag: string) => {
    await ctx.step("shared", () => SHARED); // the same payload in every run
    await ctx.step("own", () => `${tag}:`.padEnd(400, "o")); // a payload of this run alone
    await ctx.setEvent("done", `${tag}-event`.padEnd(400, "e"));
    return `${tag}-out`.padEnd(400, "r");
  });
  const child = cairn.workflow("child", async (ctx, tag: string) => ctx.step("c", () => `${tag}`.padEnd(300, "c")));
  const parent = cairn.workflow("parent", async (ctx, tag: string) => {
    const kid = await ctx.child(child, tag, { id: `${tag}-kid` });
    const out = await kid.result();
    const gate = await ctx.recv<string>("go", { timeoutMs: 60_000 });
    return [out, gate];
  });
  const waiter = cairn.workflow("waiter", async (ctx) => ctx.recv("never"));
  return { big, parent, waiter };
}

describe.each(BACKENDS)("retention on $name", (backend) => {
  const env = cairnFactory(backend);

  it("deletes a finished run's rows in every table, collects the payloads only it named, and keeps a fork whole", async () => {
    const cairn = env.cairn(await env.database());
    const { big } = register(cairn);
    await cairn.launch();
    await (await big.start("a", { id: "a" })).result();
    await (await big.start("b", { id: "b" })).result();
    const fork = await cairn.fork("a", { fromSeq: 2, id: "a-fork" });
    await fork.result();
    const store = storeOf(cairn);
    // A model call of run a and one of run b name the same prompt message by hash.
    const message = "m".repeat(300);
    const hash = hashText(message);
    for (const runId of ["a", "b"]) {
      await store.commit(null, [
        {
          type: "insert",
          table: "cairn_payloads",
          values: { hash, body: message, size: 300, created_at: 1 },
          onConflict: { keys: ["hash"], action: "ignore" },
        },
        {
          type: "insert",
          table: "cairn_model_calls",
          values: {
            run_id: runId,
            seq: 99,
            provider: "p",
            model_id: "m",
            prompt_hash: "h",
            prompt_messages: JSON.stringify(runId === "a" ? [hash] : { after: 1, add: [hash] }),
            input_tokens: 1,
            output_tokens: 1,
            total_tokens: 2,
            cost_usd: 0,
            latency_ms: 1,
            streamed: 0,
            created_at: 1,
          },
        },
      ]);
    }
    const payloadsBefore = await count(store, "SELECT count(*) AS n FROM cairn_payloads");

    // The fork copied a's journal and computed the same event and output: it names all of a's payloads.
    const deleted = await cairn.runs.delete({ ids: ["a"] });
    expect(deleted).toEqual({ runIds: ["a"], skipped: [], payloads: 0 });
    expect(await rowsOf(store, ["a"])).toBe(0);
    await expectWholeJournal(store, "a-fork");
    await expectNoDanglingHash(store);

    // b alone names its own step's value, its event, its output and (now) the prompt message.
    const deletedB = await cairn.runs.delete({ ids: ["b"] });
    expect(deletedB.payloads).toBe(4);
    expect(await count(store, "SELECT count(*) AS n FROM cairn_payloads")).toBe(payloadsBefore - 4);
    expect(await count(store, "SELECT count(*) AS n FROM cairn_payloads WHERE hash = $1", [hash])).toBe(0);
    await expectWholeJournal(store, "a-fork");
    await expectNoDanglingHash(store);
    expect(await cairn.runs.gc()).toBe(0);

    expect((await cairn.runs.delete({ ids: ["a-fork"] })).payloads).toBe(4);
    expect(await count(store, "SELECT count(*) AS n FROM cairn_payloads")).toBe(0);
    expect(await cairn.runs.gc()).toBe(0);
  });

  it("never deletes an unfinished run, a tree with one, or a child whose parent is at work; deletes a tree whole", async () => {
    const cairn = env.cairn(await env.database());
    const { parent, waiter } = register(cairn);
    await cairn.launch();
    const waiting = await waiter.start(undefined, { id: "w" });
    const p = await parent.start("p", { id: "p" });
    await eventually(async () => (await storeOf(cairn).getRun("p-kid"))?.status === "succeeded");
    await eventually(async () => (await waiting.status()).status === "waiting");

    const refused = await cairn.runs.delete({ ids: ["w", "p", "p-kid"] });
    expect(refused.runIds).toEqual([]);
    expect(refused.skipped).toEqual(["p-kid"]); // finished, but its parent still waits
    expect((await cairn.runs.delete({})).runIds).toEqual([]);

    await cairn.send("p", "go", "now");
    await p.result();
    const all = await cairn.runs.delete({ status: "succeeded" });
    expect(all.runIds.sort()).toEqual(["p", "p-kid"]);
    expect(await rowsOf(storeOf(cairn), ["p", "p-kid"])).toBe(0);
    expect((await waiting.status()).status).toBe("waiting");
    await expect(cairn.runs.delete({ status: "running" as never })).rejects.toThrow(InvalidSpecError);
    await expect(cairn.runs.delete({ ids: ["bad\u0000id"] })).rejects.toThrow(InvalidSpecError);
  });

  it("applies a retention policy in batches from the executor, by finish time", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), {
      clock,
      retention: { succeededAfterMs: 60_000, failedAfterMs: 120_000, batchSize: 2 },
      pollIntervalMs: 20,
    });
    const { big } = register(cairn);
    const failing = cairn.workflow("failing", async () => {
      throw new Error("no");
    });
    await cairn.launch();
    for (let i = 0; i < 5; i++) await (await big.start(`r${i}`, { id: `r${i}` })).result();
    await (await failing.start(undefined, { id: "f" })).result().catch(() => undefined);
    clock.advance(30_000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(await count(storeOf(cairn), "SELECT count(*) AS n FROM cairn_runs")).toBe(6);
    clock.advance(40_000);
    await eventually(async () => (await count(storeOf(cairn), "SELECT count(*) AS n FROM cairn_runs")) === 1, 15_000);
    expect((await storeOf(cairn).getRun("f"))?.status).toBe("failed");
    clock.advance(60_000);
    await eventually(async () => (await count(storeOf(cairn), "SELECT count(*) AS n FROM cairn_runs")) === 0, 15_000);
    expect(await count(storeOf(cairn), "SELECT count(*) AS n FROM cairn_payloads")).toBe(0);
  });

  it("while runs keep writing a payload that deleted runs shared, none of them loses it", async () => {
    const cairn = env.cairn(await env.database());
    const { big } = register(cairn);
    const keeper = cairn.workflow("keeper", async (ctx, i: number) => {
      for (let s = 0; s < 5; s++) await ctx.step(`shared-${s}`, () => SHARED);
      return i;
    });
    await cairn.launch();
    let stop = false;
    let deleted = 0;
    const deleting = (async () => {
      while (!stop) {
        deleted += (await cairn.runs.delete({ workflow: "big" })).runIds.length;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    const victims = Array.from({ length: 30 }, (_, i) => big.start(`v${i}`, { id: `v${i}` }).then((h) => h.result().catch(() => undefined)));
    const keepers = Array.from({ length: 30 }, (_, i) => keeper.start(i, { id: `k${i}` }).then((h) => h.result()));
    expect(await Promise.all(keepers)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    await Promise.all(victims);
    stop = true;
    await deleting;
    deleted += (await cairn.runs.delete({ workflow: "big" })).runIds.length;
    expect(deleted).toBe(30);
    for (let i = 0; i < 30; i++) await expectWholeJournal(storeOf(cairn), `k${i}`);
    await expectNoDanglingHash(storeOf(cairn));
  });

  it("under concurrent forks of the run being deleted, every fork that exists has its whole journal", async () => {
    const cairn = env.cairn(await env.database());
    const { big } = register(cairn);
    await cairn.launch();
    for (let round = 0; round < 3; round++) {
      const origin = `o${round}`;
      await (await big.start(origin, { id: origin })).result();
      const forks = Array.from({ length: 8 }, (_, i) =>
        cairn.fork(origin, { fromSeq: 3, id: `${origin}-f${i}` }).then(
          () => `${origin}-f${i}`,
          (error: unknown) => {
            expect(error).toBeInstanceOf(RunNotFoundError);
            return null;
          },
        ),
      );
      const [deleted, ...made] = await Promise.all([cairn.runs.delete({ ids: [origin] }), ...forks]);
      expect(deleted.runIds).toEqual([origin]);
      for (const id of made) {
        if (id === null) continue;
        await expectWholeJournal(storeOf(cairn), id);
        await cairn.run(id).result();
      }
      await expectNoDanglingHash(storeOf(cairn));
    }
    // The forks share the origin's payloads; deleting them all leaves nothing behind.
    const rest = (await storeOf(cairn).select<{ id: string }>("SELECT id FROM cairn_runs")).map((r) => r.id);
    await cairn.runs.delete({ ids: rest });
    expect(await count(storeOf(cairn), "SELECT count(*) AS n FROM cairn_payloads")).toBe(0);
  });
});
