import Database from "better-sqlite3";
import { describe, expect, it } from "vitest";
import type { ClaimRequest, ExecutorRow } from "../../src/store/store.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";

// The store's side of "a woken executor never claims under an identity its peers consider dead"
// (see test/crash/pause-crash.test.ts for the whole story with a SIGSTOPped process).
describe.each(BACKENDS)("claims fenced by the executor's row on $name", (backend) => {
  const env = cairnFactory(backend);

  function executor(id: string, heartbeatAt: number): ExecutorRow {
    // Another host: no pid can decide its life, only the row and its heartbeat.
    return { id, hostname: "elsewhere.invalid", pid: 1, backendPid: null, pidNamespace: null, appVersion: "default", startedAt: heartbeatAt, heartbeatAt };
  }

  function claim(executorId: string, now: number, deadExecutors: ClaimRequest["deadExecutors"] = []): ClaimRequest {
    return { executorId, appVersion: null, now, deadExecutors, workflows: ["job"], limit: 10 };
  }

  it("claims nothing under a removed id, and leaves a peer judged dead on a heartbeat it has since renewed alone", async () => {
    const db = await env.database();
    // Launched with no workflows: it migrates the database and claims nothing itself.
    const host = env.cairn(db);
    await host.launch();
    const store = storeOf(host);
    // Heartbeats near the real clock: the host's own executor must not find these rows past its lease.
    const t = Date.now();
    const producer = env.cairn(db);
    const job = producer.workflow("job", async () => "done");
    await job.start(undefined, { id: "job-1" });

    // A woken executor whose row a peer removed: no claim, no row brought back.
    expect(await store.claimRuns(claim("ghost", t + 5_000))).toBeNull();
    expect(await store.heartbeat("ghost", t + 5_000)).toBe(false);
    expect((await store.listExecutors()).some((e) => e.id === "ghost")).toBe(false);
    expect((await store.getRun("job-1"))?.status).toBe("enqueued");

    // A registered one claims, and its claim renews its heartbeat.
    await store.registerExecutor(executor("a", t + 1_000));
    expect((await store.claimRuns(claim("a", t + 2_000)))?.map((r) => r.id)).toEqual(["job-1"]);
    expect((await store.listExecutors()).find((e) => e.id === "a")?.heartbeatAt).toBe(t + 2_000);

    // A peer that judged "a" dead on the heartbeat it listed before that claim takes nothing and
    // removes nothing: "a" is alive after all.
    await store.registerExecutor(executor("b", t + 9_000));
    const stale = [{ id: "a", heartbeatAt: t + 1_000 }];
    expect(await store.claimRuns(claim("b", t + 9_000, stale))).toEqual([]);
    await store.removeDeadExecutors(stale);
    expect((await store.listExecutors()).some((e) => e.id === "a")).toBe(true);
    expect((await store.getRun("job-1"))?.executorId).toBe("a");

    // Judged on its current heartbeat, it is taken over and removed.
    const current = [{ id: "a", heartbeatAt: t + 2_000 }];
    expect((await store.claimRuns(claim("b", t + 9_000, current)))?.map((r) => r.id)).toEqual(["job-1"]);
    await store.removeDeadExecutors(current);
    expect((await store.listExecutors()).some((e) => e.id === "a")).toBe(false);
    expect((await store.getRun("job-1"))?.executorId).toBe("b");
  });

  // A busy executor's passes mostly find nothing to claim: on SQLite such a claim used to renew the
  // claimant's heartbeat anyway, a write whose commit waited for an fsync, every pass.
  it.skipIf(backend.name !== "sqlite")("a claim that takes nothing writes nothing; one that takes runs renews the heartbeat", async () => {
    const db = await env.database();
    const client = env.cairn(db);
    const job = client.workflow("job", async () => "done");
    const store = storeOf(client);
    await store.migrate();
    const t = Date.now();
    await store.registerExecutor(executor("a", t));
    // Another connection's data_version changes whenever some other connection commits a change.
    // (Not the WAL file's size: the store writes it out to its working size when it opens.)
    const observer = new Database(db, { readonly: true });
    try {
      const dataVersion = (): number => Number(observer.pragma("data_version", { simple: true }));
      const before = dataVersion();
      expect(await store.claimRuns(claim("a", t + 1_000))).toEqual([]);
      expect(dataVersion()).toBe(before);
      await store.registerExecutor(executor("c", t));
      expect(dataVersion()).not.toBe(before); // the observer does see a commit
    } finally {
      observer.close();
    }
    expect((await store.listExecutors()).find((e) => e.id === "a")?.heartbeatAt).toBe(t);

    await job.start(undefined, { id: "job-1" });
    expect((await store.claimRuns(claim("a", t + 2_000)))?.map((r) => r.id)).toEqual(["job-1"]);
    expect((await store.listExecutors()).find((e) => e.id === "a")?.heartbeatAt).toBe(t + 2_000);
  });
});
