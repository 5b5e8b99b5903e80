import pg from "pg";
import { describe, expect, it } from "vitest";
import type { ClaimRequest, ExecutorRow } from "../../src/store/store.js";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

// A peer on another host cannot be judged by its process id, only by its row: its heartbeat, and
// on PostgreSQL the database session its row names (`backend_pid`). `listExecutors` reads whether
// that session is open in the same statement as the rows (one round trip per death check); these
// pin what it reads and what an executor does with it.
describe.each(BACKENDS)("peers judged by their database session on $name", (backend) => {
  const env = cairnFactory(backend);

  function peer(id: string, backendPid: number | null): ExecutorRow {
    const now = Date.now();
    return { id, hostname: "elsewhere.invalid", pid: 1, backendPid, pidNamespace: null, appVersion: "default", startedAt: now, heartbeatAt: now };
  }

  function claim(executorId: string, limit: number): ClaimRequest {
    return { executorId, appVersion: null, now: Date.now(), deadExecutors: [], workflows: ["job"], limit };
  }

  /** A session of our own on the database (PostgreSQL), to stand for a live peer's; its pid. */
  async function openSession(database: string): Promise<{ pid: number; close(): Promise<void> } | null> {
    if (backend.name !== "postgres") return null;
    const client = new pg.Client({ connectionString: database });
    await client.connect();
    const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
    return { pid, close: () => client.end() };
  }

  it("listExecutors says whether each row's session is open (PostgreSQL), null where there is none to say", async () => {
    const db = await env.database();
    const host = env.cairn(db); // no workflows: it migrates and claims nothing
    await host.launch();
    const store = storeOf(host);
    const session = await openSession(db);
    await store.registerExecutor(peer("open", session?.pid ?? 4_000_000));
    await store.registerExecutor(peer("closed", 4_000_001)); // above any pid PostgreSQL hands out here
    await store.registerExecutor(peer("no-pid", null));

    const rows = await store.listExecutors();
    const listed = new Map(rows.map((e) => [e.id, e.sessionOpen]));
    const own = rows.filter((e) => !["open", "closed", "no-pid"].includes(e.id));
    const sessions = store.capabilities.sessionLiveness !== null;
    expect(sessions).toBe(backend.name === "postgres");
    expect(listed.get("open")).toBe(sessions ? true : null);
    expect(listed.get("closed")).toBe(sessions ? false : null);
    expect(listed.get("no-pid")).toBeNull();
    // The host's own row names its open listening session (PostgreSQL) or none (SQLite).
    expect(own.map((e) => e.sessionOpen)).toEqual([sessions ? true : null]);
    await session?.close();
  });

  it("takes over at once the runs of a peer whose session is closed, and not those of a peer whose session is open", async () => {
    const db = await env.database();
    const admin = env.cairn(db);
    await admin.launch();
    const store = storeOf(admin);
    const producer = env.cairn(db);
    const job = producer.workflow("job", async () => "done");
    await job.start(undefined, { id: "of-closed" });
    await job.start(undefined, { id: "of-open" });
    const session = await openSession(db);
    // Fresh heartbeats: only the session can make these peers dead before the 15 s lease.
    await store.registerExecutor(peer("closed", 4_000_001));
    expect((await store.claimRuns(claim("closed", 1)))?.map((r) => r.id)).toEqual(["of-closed"]);
    await store.registerExecutor(peer("open", session?.pid ?? null));
    expect((await store.claimRuns(claim("open", 1)))?.map((r) => r.id)).toEqual(["of-open"]);

    const worker = env.cairn(db);
    worker.workflow("job", async () => "done");
    const launchedAt = Date.now();
    await worker.launch();
    const status = async (id: string) => (await store.getRun(id))?.status;
    if (backend.name === "postgres") {
      await eventually(async () => (await status("of-closed")) === "succeeded", 5_000);
      expect(Date.now() - launchedAt, "taken over within a poll or two, not the lease").toBeLessThan(5_000);
      // Polls go by (500 ms each): the peer whose session is open keeps its run.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      expect(await status("of-open")).toBe("running");
      expect((await store.getRun("of-open"))?.executorId).toBe("open");
      await session!.close();
      await eventually(async () => (await status("of-open")) === "succeeded", 5_000);
    } else {
      // No sessions to judge by: both peers are alive until their lease runs out.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      expect(await status("of-closed")).toBe("running");
      expect(await status("of-open")).toBe("running");
    }
  });
});
