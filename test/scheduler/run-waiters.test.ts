import { describe, expect, it } from "vitest";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * `handle.result()` on runs that another process executes: every waiter in a process shares one
 * lookup per interval (src/scheduler/run-waiters.ts). A poll per waiter flooded PostgreSQL's pool
 * with 2,000 waiters and starved the executor (the replay fuzzer's "stall" after a SIGKILL).
 */
describe.each(BACKENDS)("many callers awaiting results, on $name", (backend) => {
  const env = cairnFactory(backend);

  it("share one lookup, and each hears of its run's end from another process", async () => {
    const db = await env.database();
    const executor = env.cairn(db, { pollIntervalMs: 50 });
    const wf = executor.workflow("waits", async (ctx, n: number) => {
      await ctx.recv("go");
      return n * 2;
    });
    await executor.launch();
    const RUNS = 200;
    const ids = Array.from({ length: RUNS }, (_, i) => `w-${i}`);
    await Promise.all(ids.map((id, i) => wf.start(i, { id })));

    // The callers: a Cairn that runs nothing, as a web server awaiting results would.
    const callers = env.cairn(db);
    const store = storeOf(callers);
    let reads = 0;
    const getRun = store.getRun.bind(store);
    const getRuns = store.getRuns.bind(store);
    store.getRun = (id) => (reads++, getRun(id));
    store.getRuns = (list) => (reads++, getRuns(list));
    const results = ids.map((id) => callers.run<number>(id).result());
    await eventually(() => reads >= RUNS);
    const before = reads;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // About ten shared lookups a second; a poll per waiter was about 2,000 reads.
    expect(reads - before).toBeLessThanOrEqual(20);

    await Promise.all(ids.map((id) => executor.send(id, "go", true)));
    expect(await Promise.all(results)).toEqual(ids.map((_, i) => i * 2));
  });
});
