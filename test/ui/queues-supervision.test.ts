import { describe, expect, it } from "vitest";
import { storeOf } from "../../src/internal.js";
import { loadRunTree } from "../../src/observe/agent-tree.js";
import { listRunPage } from "../../src/observe/run-page.js";
import { hasQueueTables, listQueueNames, loadRunQueue } from "../../src/observe/run-queue.js";
import { openStore } from "../../src/store/open-store.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { insertRuns, queuesAndSupervisor } from "./fixture.js";

/**
 * The dashboard's reads of the scheduler's queues and of supervision, on each backend: the run
 * list filtered by queue (keyset pages), a run's queue row, and a supervisor's tree with a
 * restarted child — through src/observe/ and through the HTTP API with the token.
 */
describe.each(BACKENDS)("the dashboard's queues and supervision on $name", (backend) => {
  const env = cairnFactory(backend);

  it("filters runs by queue, shows the dispatch decision, and the tree of a supervisor with a restarted child", async () => {
    const db = await env.database();
    const cairn = env.cairn(db, { pollIntervalMs: 30 });
    const { send, team } = queuesAndSupervisor(cairn);
    await cairn.launch();
    const server = await cairn.ui({ port: 0 });
    try {
      const { origin, searchParams } = new URL(server.url);
      const headers = { authorization: `Bearer ${searchParams.get("token")}` };
      const api = async <T>(path: string) => (await (await fetch(`${origin}/api${path}`, { headers })).json()) as T;
      for (const [i, to] of ["ada", "bob", "cy"].entries()) {
        await send.enqueue("emails", to, { id: `mail-${i}`, partitionKey: `tenant-${i % 2}`, priority: i });
      }
      await send.start("direct", { id: "direct-1" });
      await team.start(undefined, { id: "team-1" });
      for (const id of ["mail-0", "mail-1", "mail-2", "direct-1"]) await cairn.run(id).result();
      await eventually(
        async () =>
          (
            await cairn
              .run("team-1/worker~1")
              .status()
              .catch(() => undefined)
          )?.status === "waiting",
      );
      const store = storeOf(cairn);

      // The queue filter: only the queued runs, newest first, a page at a time, with other filters.
      expect(await listQueueNames(store)).toEqual(["emails"]);
      expect((await listRunPage(store, { queue: "emails" })).runs.map((r) => r.id)).toEqual(["mail-2", "mail-1", "mail-0"]);
      const first = await listRunPage(store, { queue: "emails", limit: 2 });
      expect(first.runs.map((r) => r.id)).toEqual(["mail-2", "mail-1"]);
      expect((await listRunPage(store, { queue: "emails", after: first.next! })).runs.map((r) => r.id)).toEqual(["mail-0"]);
      expect((await listRunPage(store, { queue: "emails", status: "succeeded", idPrefix: "mail-1" })).runs.map((r) => r.id)).toEqual(["mail-1"]);
      expect((await listRunPage(store, { queue: "nowhere" })).runs).toEqual([]);
      const filters = await api<{ queues: string[] }>("/filters");
      expect(filters.queues).toEqual(["emails"]);
      expect((await api<{ runs: { id: string }[] }>("/runs?queue=emails&limit=5")).runs.map((r) => r.id)).toEqual(["mail-2", "mail-1", "mail-0"]);

      // A run's queue: name, priority, partition key, and which executor took it, when, under which policy.
      const [executor] = await store.select<{ id: string }>("SELECT id FROM cairn_executors");
      const queue = await loadRunQueue(store, "mail-1");
      expect(queue).toMatchObject({ queue: "emails", priority: 1, partitionKey: "tenant-1", policy: "fifo", executorId: executor!.id });
      expect(queue!.dispatchedAt).toBeGreaterThanOrEqual(queue!.enqueuedAt);
      expect(await loadRunQueue(store, "direct-1")).toBeNull();
      expect((await api<{ queue: unknown }>("/runs/mail-1")).queue).toEqual(queue);
      expect((await api<{ queue: unknown }>("/runs/direct-1")).queue).toBeNull();

      // The supervisor's tree: the failed child, what replaced it, and the replacement's restart count.
      const run = (await store.getRun("team-1"))!;
      const tree = await loadRunTree(store, run);
      expect(tree.map((n) => [n.id, n.state, n.childId, n.restartCount, n.lastExitReason, n.replacedBy])).toEqual([
        ["team-1", "waiting", null, 0, null, null],
        ["team-1/worker", "failed", "worker", 0, "TypeError: tool timed out", "team-1/worker~1"],
        ["team-1/worker~1", "waiting", "worker", 1, "TypeError: tool timed out", null],
      ]);
      const served = await api<{ tree: { id: string; status: string; restartCount: number; replacedBy: string | null }[] }>("/runs/team-1/tree");
      expect(served.tree.map((n) => [n.id, n.status, n.restartCount, n.replacedBy])).toEqual(
        tree.map((n) => [n.id, n.state, n.restartCount, n.replacedBy]),
      );
    } finally {
      await server.close();
    }
  });

  it("reads a database without the queues layer's tables: no queues, no queued runs, no error", async () => {
    const database = await env.database();
    const store = openStore(database);
    try {
      await store.migrate(); // the core layer only
      expect(await hasQueueTables(store)).toBe(false);
      await expect(store.select("SELECT 1 FROM cairn_queue_runs")).rejects.toThrow();
      await insertRuns(database, 2, 1);
      expect(await listQueueNames(store)).toEqual([]);
      expect(await listRunPage(store, { queue: "emails" })).toEqual({ runs: [], next: null });
      expect(await loadRunQueue(store, "mail-1")).toBeNull();
      expect((await listRunPage(store, {})).runs.map((r) => r.id)).toEqual(["bulk-1", "bulk-0"]);
    } finally {
      await store.close();
    }
  });
});
