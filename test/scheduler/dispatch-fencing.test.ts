import { describe, expect, it } from "vitest";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";

// A dispatch is a claim: it holds only while the dispatcher's own executor row exists (the row a
// peer removes when it presumes the dispatcher dead — paused past its lease, say). A woken
// dispatcher whose row is gone decides nothing: no run moves, no decision is recorded.
describe.each(BACKENDS)("dispatch fenced by the executor's row on $name", (backend) => {
  const env = cairnFactory(backend);

  it("claimWith runs nothing under a removed id, and renews the heartbeat of a registered one", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    cairn.queue("q");
    const job = cairn.workflow("job", async () => 1);
    await job.enqueue("q", undefined, { id: "queued-1" });
    const store = storeOf(cairn);
    const t = Date.now();
    let ran = false;
    expect(await store.claimWith("ghost", t, async () => (ran = true))).toBeNull();
    expect(ran).toBe(false);

    await store.registerExecutor({
      id: "live",
      hostname: "elsewhere.invalid",
      pid: 1,
      backendPid: null,
      pidNamespace: null,
      appVersion: "default",
      startedAt: t,
      heartbeatAt: t,
      capacity: 4,
    });
    expect(await store.claimWith("live", t + 1_000, async (sql) => sql.all({ text: "SELECT 1 AS one" }, []))).toEqual([{ one: 1 }]);
    expect((await store.listExecutors()).find((e) => e.id === "live")).toMatchObject({ heartbeatAt: t + 1_000, capacity: 4 });

    // The queued run is the scheduler's: the core claim leaves it for the queue's dispatch.
    const claimed = await store.claimRuns({ executorId: "live", appVersion: null, now: t + 1_000, deadExecutors: [], workflows: ["job"], limit: 10 });
    expect(claimed).toEqual([]);
    expect((await store.getRun("queued-1"))?.status).toBe("enqueued");
  });
});
