import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

describe.each(BACKENDS)("queues smoke on $name", (backend) => {
  const env = cairnFactory(backend);
  it("runs an enqueued run", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { onError: (e) => console.error(e) });
    cairn.queue("emails", { concurrency: 2 });
    const wf = cairn.workflow("send", async (ctx, n: number) => ctx.step("s", async () => n * 2));
    await cairn.launch();
    const handles = await Promise.all([1, 2, 3, 4, 5].map((n) => wf.enqueue("emails", n)));
    const results = await Promise.all(handles.map((h) => h.result()));
    expect(results).toEqual([2, 4, 6, 8, 10]);
    const rows = await cairn.query("SELECT run_id, executor_id, policy, dispatched_at FROM cairn_queue_runs");
    expect(rows.rows.length).toBe(5);
    expect(rows.rows.every((r) => r.policy === "fifo")).toBe(true);
  });
});
