import Database from "better-sqlite3";
import pg from "pg";
import { describe, expect, it } from "vitest";
import type { Cairn, RunHandle, WorkflowContext } from "../../src/index.js";
import { runtimeOf, storeOf } from "../../src/internal.js";
import { positionalPlaceholders } from "../../src/store/rows.js";
import { PARKER_GRACE_MS } from "../../src/store/statements.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * A sleeping run's wake-up goes to the executor that parked it (statements.ts, ParkerFirst): that
 * executor holds it warm and continues it from memory, where any other would replay its journal. Others may take it once it is `PARKER_GRACE_MS` overdue, or at once when no
 * executor row shows its parker any more. Replays are counted by entries into the workflow's body.
 */
describe.each(BACKENDS)("due runs go to their parker first on $name", (backend) => {
  const env = cairnFactory(backend);
  const postgresOnly = it.skipIf(backend.name !== "postgres");

  const napper =
    (entries: string[], where: string, napMs = 40) =>
    async (ctx: WorkflowContext, naps: number) => {
      entries.push(where);
      for (let i = 0; i < naps; i++) {
        await ctx.step(`work-${i}`, () => i);
        await ctx.sleep(`nap-${i}`, napMs);
      }
      return naps;
    };

  /** How many times the executor read its next wake-up in the next `ms` (a pass reads it; a spinning executor, hundreds of times a second). */
  async function nextWakeReadsIn(cairn: Cairn, ms: number): Promise<number> {
    const store = storeOf(cairn);
    const nextWakeAt = store.nextWakeAt.bind(store);
    let reads = 0;
    store.nextWakeAt = (version, workflows) => {
      reads++;
      return nextWakeAt(version, workflows);
    };
    await new Promise((resolve) => setTimeout(resolve, ms));
    return reads;
  }

  /** One executor (`here`, on a ManualClock) that parked the run "napper", asleep for 40 ms. */
  async function parkedNapper() {
    const db = await env.database();
    const clock = new ManualClock();
    const entries: string[] = [];
    const here = env.cairn(db, { clock });
    const wf = here.workflow("napper", napper(entries, "here"));
    await here.launch();
    const run = await wf.start(1, { id: "napper" });
    await eventually(async () => (await run.status()).status === "waiting" && !loaded(here).includes("napper"));
    return { db, clock, entries, here };
  }

  /** A write to a SQLite file from outside Cairn (`$n` placeholders, as on PostgreSQL). */
  async function writeSqlite(path: string, sql: string, values: unknown[]): Promise<void> {
    const raw = new Database(path);
    try {
      const q = positionalPlaceholders(sql, values);
      raw.prepare(q.text).run(...q.params);
    } finally {
      raw.close();
    }
  }

  function loaded(cairn: Cairn): string[] {
    return (runtimeOf(cairn) as unknown as { executor: { loadedRunIds: string[] } }).executor.loadedRunIds;
  }

  it("two executors' sleeping runs each wake on the executor that parked them, warm", async () => {
    const db = await env.database();
    const entries: string[] = [];
    // A clock that moves only when told, 40 ms (a nap) at a time once every run is parked again:
    // a peer's grace never runs out, so however slow a loaded machine makes a parker's claim, a run
    // that replays was taken from a live parker by a peer.
    const clock = new ManualClock();
    const a = env.cairn(db, { clock });
    const b = env.cairn(db, { clock });
    const onA = a.workflow("napper", napper(entries, "a"));
    const onB = b.workflow("napper", napper(entries, "b"));
    await a.launch();
    await b.launch();
    // A launched Cairn runs the runs it starts: four parked by each executor.
    const runs: RunHandle<number>[] = [];
    for (let k = 0; k < 8; k++) runs.push(await (k % 2 === 0 ? onA : onB).start(6, { id: `napper-${k}` }));
    for (;;) {
      let done = 0;
      await eventually(async () => {
        const states = await Promise.all(runs.map((run) => run.status()));
        done = states.filter((state) => state.status === "succeeded").length;
        return states.every(
          (state, k) => state.status === "succeeded" || (state.status === "waiting" && ![...loaded(a), ...loaded(b)].includes(runs[k]!.id)),
        );
      });
      if (done === runs.length) break;
      clock.advance(40);
    }
    expect(await Promise.all(runs.map((run) => run.result()))).toEqual(runs.map(() => 6));
    // Each run entered its body once: 5 wake-ups each, 40 in all, none replayed. Before, each
    // wake-up went to whichever executor's timer fired first: about half of them replayed (32
    // entries measured on PostgreSQL; on SQLite, 16).
    expect(entries.filter((e) => e === "a")).toHaveLength(4);
    expect(entries.filter((e) => e === "b")).toHaveLength(4);
  });

  it("a run whose parker is frozen (its row alive, nothing claiming) is taken by another executor once it is the grace overdue", async () => {
    const { db, clock, entries, here } = await parkedNapper();
    // Frozen: the parker's row stays (a fresh heartbeat; on PostgreSQL, a live session's pid) and nothing of it acts.
    const { rows } = await here.query("SELECT e.* FROM cairn_executors e");
    await here.shutdown();
    const row = rows[0]!;
    expect(row.wake_channel).toEqual(expect.any(String)); // the name its runs carry as their parker
    const onPostgres = backend.name === "postgres";
    const frozen = onPostgres ? new pg.Client({ connectionString: db }) : null;
    await frozen?.connect();
    try {
      const pid = frozen === null ? null : (await frozen.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]!.pid;
      const insert = `INSERT INTO cairn_executors (id, hostname, pid, backend_pid, app_version, started_at, heartbeat_at, wake_channel, workflows)
         VALUES ('frozen', 'frozen', 1, $1, $2, $3, $3, $4, $5)`;
      const values = [pid, row.app_version, clock.now(), row.wake_channel, row.workflows];
      if (frozen !== null) await frozen.query(insert, values);
      else await writeSqlite(db, insert, values);
      const there = env.cairn(db, { clock, pollIntervalMs: 20 });
      there.workflow("napper", napper(entries, "there"));
      await there.launch();
      clock.advance(40); // due now, but its parker's: the other executor's polls leave it alone
      // ... and only its polls (every 20 ms here): its timer is armed at the grace's end, not at
      // the run it may not take yet (armed there, it read its next wake-up ~190 times in 300 ms).
      expect(await nextWakeReadsIn(there, 300)).toBeLessThan(40);
      expect((await there.run("napper").status()).status).toBe("waiting");
      clock.advance(PARKER_GRACE_MS);
      expect(await there.run("napper").result()).toBe(1);
      expect(entries).toEqual(["here", "there"]);
    } finally {
      await frozen?.end();
    }
  });

  postgresOnly("a full parker hands its due runs on at once: a sleep's end, and a message", async () => {
    const db = await env.database();
    const entries: string[] = [];
    // A clock that moves only when told: the grace never runs out, so whatever the other executor
    // takes was handed on. Polls a minute apart: it was woken to it.
    const clock = new ManualClock();
    const here = env.cairn(db, { clock, maxConcurrentRuns: 2, pollIntervalMs: 60_000 });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const blocker = here.workflow("blocker", async (ctx) => ctx.step("hold", () => released));
    const wf = here.workflow("napper", napper(entries, "here"));
    const listener = here.workflow("listener", async (ctx: WorkflowContext) => {
      entries.push("listener here");
      return ctx.recv<number>("n");
    });
    await here.launch();
    const sleeping = await wf.start(1, { id: "napper" });
    const listening = await listener.start(undefined, { id: "listener" });
    for (const id of ["napper", "listener"]) {
      await eventually(async () => (await here.run(id).status()).status === "waiting" && !loaded(here).includes(id));
    }
    await blocker.start(undefined, { id: "blocker-1" });
    await blocker.start(undefined, { id: "blocker-2" });
    await eventually(() => loaded(here).includes("blocker-1") && loaded(here).includes("blocker-2"));
    const there = env.cairn(db, { clock, pollIntervalMs: 60_000 });
    there.workflow("napper", napper(entries, "there"));
    there.workflow("listener", async (ctx: WorkflowContext) => {
      entries.push("listener there");
      return ctx.recv<number>("n");
    });
    await there.launch();
    // The sleep ends while its parker is full: its timer's pass hands it on.
    clock.advance(40);
    expect(await sleeping.result()).toBe(1);
    // The message wakes the parker alone, which is full: it passes the wake-up on.
    await env.cairn(db, { clock }).send("listener", "n", 7);
    expect(await listening.result()).toBe(7);
    expect(entries.sort()).toEqual(["here", "listener here", "listener there", "there"]);
    release();
  });

  // The hand-on is bounded (64 runs a pass, only runs still within the grace, only when some other
  // executor is registered): the run a message woke must still be among what it hands on.
  postgresOnly.each([
    { peer: "of the same version, with 200 older due runs of the parker's it cannot take", fillers: 200, recoverAllVersions: false },
    { peer: "of another version recovering every version", fillers: 0, recoverAllVersions: true },
  ])("a full parker hands a message's run on to a peer $peer", async ({ fillers, recoverAllVersions }) => {
    const db = await env.database();
    const here = env.cairn(db, { maxConcurrentRuns: 1, pollIntervalMs: 60_000, warmRuns: { maxRuns: 0 }, appVersion: "v1" });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const blocker = here.workflow("blocker", async (ctx) => ctx.step("hold", () => released));
    // Asleep until after the blocker holds the only slot; then due, and left past the grace.
    const filler = here.workflow("filler", async (ctx: WorkflowContext) => ctx.sleep("nap", 1_500));
    const listener = here.workflow("listener", async (ctx: WorkflowContext) => ctx.recv<number>("n"));
    await here.launch();
    const listening = await listener.start(undefined, { id: "listener" });
    for (let i = 0; i < fillers; i++) await filler.start(undefined, { id: `filler-${String(i).padStart(3, "0")}` });
    await eventually(async () => {
      const [row] = await storeOf(here).select<{ n: number | string }>("SELECT count(*) AS n FROM cairn_runs WHERE status = 'waiting'");
      return Number(row!.n) === fillers + 1 && loaded(here).length === 0;
    });
    await blocker.start(undefined, { id: "blocker" });
    await eventually(() => loaded(here).includes("blocker"));
    // Polls a minute apart: the peer takes the run because it was handed on and it was told.
    const there = env.cairn(db, { pollIntervalMs: 60_000, appVersion: recoverAllVersions ? "v2" : "v1", recoverAllVersions });
    there.workflow("listener", async (ctx: WorkflowContext) => ctx.recv<number>("n"));
    await there.launch();
    if (fillers > 0) {
      const [row] = await storeOf(here).select<{ w: number | string }>("SELECT max(wake_at) AS w FROM cairn_runs WHERE workflow = 'filler'");
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Number(row!.w) + PARKER_GRACE_MS - Date.now())));
    }
    await here.send("listener", "n", 7);
    expect(await listening.result()).toBe(7);
    release();
  });

  it("a full executor does not spin on a due run it cannot take; it claims it once a slot frees", async () => {
    const db = await env.database();
    const entries: string[] = [];
    const cairn = env.cairn(db, { maxConcurrentRuns: 1 });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const blocker = cairn.workflow("blocker", async (ctx) => ctx.step("hold", () => released));
    // A nap long enough for the blocker to take the only slot first, on a loaded machine too.
    const wf = cairn.workflow("napper", napper(entries, "here", 1_000));
    await cairn.launch();
    const run = await wf.start(1, { id: "napper" });
    await eventually(async () => (await run.status()).status === "waiting" && !loaded(cairn).includes("napper"));
    await blocker.start(undefined, { id: "blocker" });
    await eventually(() => loaded(cairn).includes("blocker"));
    const napOver = (await storeOf(cairn).getRun("napper"))!.wakeAt!;
    await new Promise((resolve) => setTimeout(resolve, napOver - Date.now() + 100));
    const reads = await nextWakeReadsIn(cairn, 500);
    // Polls only (every 200 ms on SQLite, 500 ms on PostgreSQL). It was a pass after each: ~700 a second.
    expect(reads).toBeLessThan(10);
    expect((await run.status()).status).toBe("waiting");
    // Alone, it hands its due run to nobody (a full parker's polls did, rewriting every due row).
    const [row] = await storeOf(cairn).select<{ wake_channel: string | null }>("SELECT wake_channel FROM cairn_runs WHERE id = 'napper'");
    expect(row!.wake_channel).toBe(storeOf(cairn).ownParker());
    release();
    expect(await run.result()).toBe(1);
    expect(entries).toEqual(["here"]);
  });

  it("an executor does not spin on a due run of a workflow it does not register", async () => {
    const db = await env.database();
    const entries: string[] = [];
    const other = env.cairn(db);
    const sleepy = other.workflow("sleepy", napper(entries, "other"));
    await other.launch();
    const run = await sleepy.start(1, { id: "sleepy" });
    await eventually(async () => (await run.status()).status === "waiting" && !loaded(other).includes("sleepy"));
    await other.shutdown(); // nobody runs it now; it falls due 40 ms after it went to sleep
    const cairn = env.cairn(db);
    cairn.workflow("napper", napper(entries, "here"));
    await cairn.launch();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const reads = await nextWakeReadsIn(cairn, 500);
    // Polls only. Before, its timer was armed at that run, whose claim it cannot make: ~600 passes a second.
    expect(reads).toBeLessThan(10);
    expect((await storeOf(cairn).getRun("sleepy"))!.status).toBe("waiting");
  });

  it("a slot freed while a claim is in flight still lets the executor's timer take the next due run", async () => {
    // The claim fills the room it was asked for, though a run let go meanwhile: the executor has a
    // free slot, and a run still due must get its timer (polls are a minute apart; no run is held
    // warm, so no run's own timer helps; the run claimed stays, so its end pokes nothing).
    const db = await env.database();
    const cairn = env.cairn(db, { maxConcurrentRuns: 2, warmRuns: { maxRuns: 0 }, pollIntervalMs: 60_000 });
    let releaseBlocker!: () => void;
    const blockerReleased = new Promise<void>((resolve) => (releaseBlocker = resolve));
    let releaseHolders!: () => void;
    const holdersReleased = new Promise<void>((resolve) => (releaseHolders = resolve));
    const blocker = cairn.workflow("blocker", async (ctx) => ctx.step("hold", () => blockerReleased));
    const holding = new Set<string>();
    const holder = cairn.workflow("holder", async (ctx: WorkflowContext) => {
      await ctx.sleep("nap", 300);
      await ctx.step("hold", async () => {
        holding.add(ctx.runId);
        await holdersReleased;
      });
    });
    await cairn.launch();
    const runs = [await holder.start(undefined, { id: "holder-1" }), await holder.start(undefined, { id: "holder-2" })];
    for (const run of runs) await eventually(async () => (await run.status()).status === "waiting" && !loaded(cairn).includes(run.id));
    await blocker.start(undefined, { id: "blocker" });
    await eventually(() => loaded(cairn).includes("blocker"));
    const store = storeOf(cairn);
    const claimRuns = store.claimRuns.bind(store);
    let freed = false;
    store.claimRuns = async (request) => {
      if (!freed && request.limit === 1) {
        freed = true;
        releaseBlocker(); // the blocker lets go while this claim is in flight
        await eventually(() => !loaded(cairn).includes("blocker"));
        await new Promise((resolve) => setTimeout(resolve, 100)); // the second nap is over too
      }
      return claimRuns(request);
    };
    await eventually(() => holding.size === 2);
    expect(freed).toBe(true);
    releaseHolders();
    await Promise.all(runs.map((run) => run.result()));
  }, 20_000);

  it("a message from another executor's Cairn wakes the run at once: its parker on PostgreSQL, the sender's executor on SQLite", async () => {
    // A clock that moves only when told: the grace never runs out. The parker polls a minute apart.
    const clock = new ManualClock();
    const db = await env.database();
    const entries: string[] = [];
    const listener = (where: string) => async (ctx: WorkflowContext) => {
      entries.push(where);
      return ctx.recv<number>("n");
    };
    const here = env.cairn(db, { clock, pollIntervalMs: 60_000 });
    const listening = await here.workflow("listener", listener("here")).start(undefined, { id: "listener" });
    await here.launch();
    await eventually(async () => (await listening.status()).status === "waiting" && !loaded(here).includes("listener"));
    const there = env.cairn(db, { clock, pollIntervalMs: 60_000 });
    there.workflow("listener", listener("there"));
    await there.launch();
    await there.send("listener", "n", 7);
    expect(await listening.result()).toBe(7);
    // PostgreSQL wakes the parker alone (its channel), which continues the run warm. SQLite cannot
    // tell another store: the run is no longer its parker's, and the sender's executor, poked in
    // its own process, takes it (before, it waited for the parker's poll, or the grace).
    expect(entries).toEqual(backend.name === "postgres" ? ["here"] : ["here", "there"]);
  });

  it("a run whose parker shut down is taken by another executor at its wake-up, with no grace", async () => {
    const { db, clock, entries, here } = await parkedNapper();
    await here.shutdown(); // its executor row goes: nobody holds the run warm
    const there = env.cairn(db, { clock });
    there.workflow("napper", napper(entries, "there"));
    await there.launch();
    clock.advance(40);
    expect(await there.run("napper").result()).toBe(1);
    expect(entries).toEqual(["here", "there"]);
  });
});
