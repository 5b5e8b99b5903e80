import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { ClaimRequest, ExecutorRow } from "../../src/store/store.js";
import { BACKENDS, type Backend } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";

/**
 * The order a claim takes runs in (`claimBranches`, src/store/statements.ts): runs whose executor is
 * gone first (oldest first), then due timers and started runs together, in the order they became
 * claimable (a timer when it fell due, whatever the run's age; a started run when it was created) —
 * the same on both backends, for a claim of this version and of all.
 */
describe.each(BACKENDS)("the order of a claim on $name", (backend) => {
  const env = cairnFactory(backend);

  it.each([
    { versions: "this version", appVersion: "v1" as string | null },
    { versions: "every version", appVersion: null },
  ])("runs under way first, then timers and new runs first come, first served ($versions)", async ({ appVersion }) => {
    const db = await env.database();
    const client = env.cairn(db, { appVersion: "v1" });
    const job = client.workflow("job", async () => "done");
    const store = storeOf(client);
    await store.migrate();
    const ids = ["fresh-old", "fresh-young", "due-first", "due-late", "due-early", "due-later", "not-due", "orphan", "orphan-2"];
    for (const id of ids) await job.start(undefined, { id });
    const t = Date.now();
    // Ages and states set directly: the claim is what is under test, not how runs got here.
    await write(backend, db, [
      [`UPDATE cairn_runs SET created_at = $1 WHERE id = 'fresh-old'`, [t - 90]],
      [`UPDATE cairn_runs SET created_at = $1 WHERE id = 'fresh-young'`, [t - 80]],
      // Fell due before either new run was started: it goes first of the three.
      [`UPDATE cairn_runs SET status = 'waiting', created_at = $1, wake_at = $2 WHERE id = 'due-first'`, [t - 30, t - 100]],
      // The oldest waiting run falls due last: a claim by age would take it first.
      [`UPDATE cairn_runs SET status = 'waiting', created_at = $1, wake_at = $2 WHERE id = 'due-later'`, [t - 200, t - 1]],
      [`UPDATE cairn_runs SET status = 'waiting', created_at = $1, wake_at = $2 WHERE id = 'due-late'`, [t - 50, t - 10]],
      [`UPDATE cairn_runs SET status = 'waiting', created_at = $1, wake_at = $2 WHERE id = 'due-early'`, [t - 40, t - 20]],
      [`UPDATE cairn_runs SET status = 'waiting', created_at = $1, wake_at = $2 WHERE id = 'not-due'`, [t - 300, t + 60_000]],
      // Running under an executor that has no row: nobody runs them. The youngest of all.
      [`UPDATE cairn_runs SET status = 'running', executor_id = 'gone', created_at = $1 WHERE id = 'orphan'`, [t - 2]],
      [`UPDATE cairn_runs SET status = 'running', executor_id = 'gone', created_at = $1 WHERE id = 'orphan-2'`, [t - 1]],
    ]);
    await store.registerExecutor(executor("a", t));
    const claim = async (limit: number): Promise<string[]> =>
      ((await store.claimRuns({ executorId: "a", appVersion, now: t, deadExecutors: [], workflows: ["job"], limit })) ?? []).map((r) => r.id).sort();

    // A claim spanning the branches: both orphans, then the first of the rest to become claimable.
    expect(await claim(3)).toEqual(["due-first", "orphan", "orphan-2"]);
    // Then one at a time: new runs and timers by when each became claimable.
    const taken: string[] = [];
    for (let i = 0; i < 5; i++) taken.push(...(await claim(1)));
    expect(taken).toEqual(["fresh-old", "fresh-young", "due-early", "due-late", "due-later"]);
    // Nothing not yet due.
    expect(await claim(5)).toEqual([]);
    expect((await store.getRun("not-due"))?.status).toBe("waiting");
    const orphan = await store.getRun("orphan");
    expect([orphan?.status, orphan?.executorId, orphan?.recoveries]).toEqual(["running", "a", 1]);
  });

  it("a message to a run already due leaves its place in line", async () => {
    const db = await env.database();
    const client = env.cairn(db, { appVersion: "v1" });
    const job = client.workflow("job", async () => "done");
    const store = storeOf(client);
    await store.migrate();
    for (const id of ["due-long", "due-since"]) await job.start(undefined, { id });
    const t = Date.now();
    await write(backend, db, [
      [`UPDATE cairn_runs SET status = 'waiting', wake_at = $1 WHERE id = 'due-long'`, [t - 100]],
      [`UPDATE cairn_runs SET status = 'waiting', wake_at = $1 WHERE id = 'due-since'`, [t - 50]],
    ]);
    // Delivered after both fell due: it must not move "due-long" behind "due-since".
    await client.send("due-long", "news", { at: t });
    expect((await store.getRun("due-long"))?.wakeAt).toBe(t - 100);
    await store.registerExecutor(executor("a", t));
    const first = await store.claimRuns({ executorId: "a", appVersion: "v1", now: t + 1_000, deadExecutors: [], workflows: ["job"], limit: 1 });
    expect(first?.map((r) => r.id)).toEqual(["due-long"]);
  });

  it("claims racing from several executors take every claimable run exactly once", async () => {
    // PostgreSQL: each branch locks what it reads (FOR UPDATE SKIP LOCKED) and a claim may lock rows
    // it does not take until it commits (postgres-claim.ts): a racing claim skips those, and must
    // neither take a run twice nor leave one behind for good. SQLite: claims take turns.
    const db = await env.database();
    const clients = ["a", "b", "c", "d"].map(() => env.cairn(db, { appVersion: "v1" }));
    const job = clients[0]!.workflow("job", async () => "done");
    for (const client of clients.slice(1)) client.workflow("job", async () => "done");
    await storeOf(clients[0]!).migrate();
    const kinds = ["fresh", "due", "orphan"] as const;
    const ids = kinds.flatMap((kind) => Array.from({ length: 60 }, (_, i) => `${kind}-${i}`));
    await job.startMany(ids.map((id) => ({ input: undefined, options: { id } })));
    const t = Date.now();
    await write(backend, db, [
      [`UPDATE cairn_runs SET status = 'waiting', wake_at = CAST($1 AS BIGINT) + CAST(substr(id, 5) AS INTEGER) WHERE id LIKE 'due-%'`, [t - 1000]],
      [`UPDATE cairn_runs SET status = 'running', executor_id = 'gone' WHERE id LIKE 'orphan-%'`, []],
    ]);
    const stores = clients.map((client) => storeOf(client));
    const names = ["a", "b", "c", "d"];
    // Each through its own store: every pool connected before the race, so none starts late.
    for (const [i, name] of names.entries()) await stores[i]!.registerExecutor(executor(name, t));
    const taken = new Map<string, string[]>(names.map((name) => [name, []]));
    const claimer = async (i: number): Promise<void> => {
      // Until a claim finds nothing twice in a row (a peer's lock may hide runs for a moment).
      for (let empty = 0; empty < 2;) {
        const rows =
          (await stores[i]!.claimRuns({ executorId: names[i]!, appVersion: "v1", now: t + 1, deadExecutors: [], workflows: ["job"], limit: 7 })) ?? [];
        taken.get(names[i]!)!.push(...rows.map((row) => row.id));
        empty = rows.length === 0 ? empty + 1 : 0;
      }
    };
    await Promise.all(names.map((_, i) => claimer(i)));
    // Whatever a lock hid from every claimer at its last look is still claimable: one more claim takes it.
    const rest = (await stores[0]!.claimRuns({ executorId: "a", appVersion: "v1", now: t + 1, deadExecutors: [], workflows: ["job"], limit: 1000 })) ?? [];
    taken.get("a")!.push(...rest.map((row) => row.id));
    const all = [...taken.values()].flat();
    expect(all.length).toBe(ids.length);
    expect(new Set(all)).toEqual(new Set(ids));
    // Each run is held by the executor whose claim returned it, and counts a recovery only if it was an orphan.
    const rows = await stores[0]!.getRuns(ids);
    const holder = new Map([...taken].flatMap(([name, runIds]) => runIds.map((id) => [id, name] as const)));
    for (const row of rows) {
      expect([row.id, row.status, row.executorId]).toEqual([row.id, "running", holder.get(row.id)]);
      expect([row.id, row.recoveries]).toEqual([row.id, row.id.startsWith("orphan-") ? 1 : 0]);
    }
    if (backend.name === "postgres") expect(names.filter((name) => taken.get(name)!.length > 0).length).toBeGreaterThan(1);
  });

  it("a claim for one version leaves another version's runs", async () => {
    const db = await env.database();
    const older = env.cairn(db, { appVersion: "v1" });
    const olderJob = older.workflow("job", async () => "done");
    await storeOf(older).migrate();
    await olderJob.start(undefined, { id: "v1-run" });
    const newer = env.cairn(db, { appVersion: "v2" });
    await newer.workflow("job", async () => "done").start(undefined, { id: "v2-run" });
    const store = storeOf(newer);
    const t = Date.now();
    await store.registerExecutor(executor("a", t));
    const request = { executorId: "a", now: t, deadExecutors: [], workflows: ["job"], limit: 10 };
    expect(((await store.claimRuns({ ...request, appVersion: "v2" })) ?? []).map((r) => r.id)).toEqual(["v2-run"]);
    expect(((await store.claimRuns({ ...request, appVersion: null })) ?? []).map((r) => r.id)).toEqual(["v1-run"]);
  });
});

function executor(id: string, heartbeatAt: number): ExecutorRow {
  return { id, hostname: "elsewhere.invalid", pid: 1, backendPid: null, pidNamespace: null, appVersion: "v1", startedAt: heartbeatAt, heartbeatAt };
}

/** Plain SQL on a connection of its own (`$n` placeholders on both backends). */
async function write(backend: Backend, database: string, statements: [string, unknown[]][]): Promise<void> {
  if (backend.name === "sqlite") {
    const db = new Database(database);
    try {
      for (const [text, params] of statements) db.prepare(text.replace(/\$\d+/g, "?")).run(...params); // each $n once, in order
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: database });
  await client.connect();
  try {
    for (const [text, params] of statements) await client.query(text, params);
  } finally {
    await client.end();
  }
}
