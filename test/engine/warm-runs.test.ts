import { describe, expect, it } from "vitest";
import { InvalidSpecError, type Cairn, type WorkflowContext } from "../../src/index.js";
import { runtimeOf, storeOf } from "../../src/internal.js";
import { PARKER_GRACE_MS } from "../../src/store/statements.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { advanceUntilSettled, cairnFactory, eventually } from "../harness.js";

/**
 * Warm runs (src/engine/warm-runs.ts): a run that unloads to wait and is claimed back by the same
 * executor continues from memory; anything that may have changed what a replay would rebuild sends
 * it down the replay path instead. Replays are counted by how many times the workflow function is
 * entered (once live, once per replay).
 */

interface Probe {
  entered: number;
  bodies: number;
  /** ctx.isReplaying after each wake-up. */
  replayingAfterWake: boolean[];
}

const probe = (): Probe => ({ entered: 0, bodies: 0, replayingAfterWake: [] });

function warmCount(cairn: Cairn): number {
  return (runtimeOf(cairn) as unknown as { executor: { warmRuns: { size: number } } }).executor.warmRuns.size;
}

async function waiting(cairn: Cairn, runId: string): Promise<void> {
  await eventually(async () => (await cairn.run(runId).status()).status === "waiting");
}

/**
 * Advances the clock by `stepMs` each time the run has unloaded, until `work` settles: every sleep
 * then really unloads the run (advancing while it runs would let a sleep end in memory).
 */
async function wakeEachTime<T>(cairn: Cairn, clock: ManualClock, runId: string, work: Promise<T>, stepMs: number): Promise<T> {
  let settled = false;
  const done = work.finally(() => (settled = true));
  while (!settled) {
    await new Promise((resolve) => setTimeout(resolve, 1));
    const row = await storeOf(cairn).getRun(runId);
    if (!settled && row?.status === "waiting" && !loaded(cairn).includes(runId)) clock.advance(stepMs);
  }
  return done;
}

function loaded(cairn: Cairn): string[] {
  return (runtimeOf(cairn) as unknown as { executor: { loadedRunIds: string[] } }).executor.loadedRunIds;
}

/** Waits until the run's suspend has been heard by its executor (it is then parked, or dropped). */
async function unloaded(cairn: Cairn, runId: string): Promise<void> {
  await waiting(cairn, runId);
  await eventually(() => !loaded(cairn).includes(runId));
}

describe.each(BACKENDS)("warm runs on $name", (backend) => {
  const env = cairnFactory(backend);

  const sleeper = (p: Probe) => async (ctx: WorkflowContext, n: number) => {
    p.entered++;
    for (let i = 0; i < n; i++) {
      await ctx.step(`work-${i}`, () => ++p.bodies);
      await ctx.sleep(`nap-${i}`, 1_000);
      p.replayingAfterWake.push(ctx.isReplaying);
    }
    return p.bodies;
  };

  it("a run that sleeps 50 times continues from memory after every wake-up, and replays with the cache off", async () => {
    for (const maxRuns of [100, 0]) {
      const clock = new ManualClock();
      const cairn = env.cairn(await env.database(), { clock, warmRuns: { maxRuns } });
      const p = probe();
      const wf = cairn.workflow("sleeper", sleeper(p));
      await cairn.launch();
      const run = await wf.start(50, { id: "sleeper" });
      expect(await wakeEachTime(cairn, clock, "sleeper", run.result(), 1_000)).toBe(50);
      expect(p.bodies).toBe(50);
      expect(p.entered).toBe(maxRuns === 0 ? 51 : 1);
      if (maxRuns > 0) expect(p.replayingAfterWake.every((r) => !r)).toBe(true);
      const journal = await storeOf(cairn).loadJournal("sleeper");
      expect(journal.map((r) => `${r.seq}:${r.name}:${r.status}`)).toEqual(
        Array.from({ length: 50 }, (_, i) => [`${2 * i}:work-${i}:succeeded`, `${2 * i + 1}:nap-${i}:succeeded`]).flat(),
      );
      // Every sleep's end was recorded in order, as a replay would have.
      expect(journal.map((r) => r.completion)).toEqual(Array.from({ length: 100 }, (_, i) => i));
      expect(warmCount(cairn)).toBe(0);
      await cairn.shutdown();
    }
  });

  it("continues receives, selects and children's results warm, with the values a replay would give", async () => {
    const cairn = env.cairn(await env.database());
    const p = probe();
    const child = cairn.workflow("kid", async (ctx, n: number) => {
      await ctx.recv("go");
      return n * 2;
    });
    const wf = cairn.workflow("mixed", async (ctx) => {
      p.entered++;
      const got: unknown[] = [];
      got.push(await ctx.recv("a"));
      const won = await ctx.select("pick", { b: { topic: "b" }, late: { timeoutMs: 60_000 } });
      got.push(won.kind === "message" ? won.value : won.key);
      const kid = await ctx.child(child, 21, { id: "kid" });
      await ctx.send("kid", "go", 1);
      got.push(await kid.result());
      got.push(await ctx.recv("c", { timeoutMs: 60_000 }));
      return got;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "mixed" });
    await unloaded(cairn, "mixed");
    await cairn.send("mixed", "a", "first");
    await eventually(async () => (await storeOf(cairn).loadJournal("mixed")).some((r) => r.name === "pick"));
    await unloaded(cairn, "mixed");
    await cairn.send("mixed", "b", "second");
    await eventually(async () => (await storeOf(cairn).loadJournal("mixed")).some((r) => r.name === "c"));
    await unloaded(cairn, "mixed");
    await cairn.send("mixed", "c", "fourth");
    expect(await run.result()).toEqual(["first", "second", 42, "fourth"]);
    expect(p.entered).toBe(1);
  });

  it("replays a run cancelled and resumed while it was parked", async () => {
    const cairn = env.cairn(await env.database());
    const p = probe();
    const wf = cairn.workflow("patient", async (ctx) => {
      p.entered++;
      await ctx.step("before", () => ++p.bodies);
      return ctx.recv("go");
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "patient" });
    await unloaded(cairn, "patient");
    expect(warmCount(cairn)).toBe(1);
    await cairn.cancel("patient");
    expect(warmCount(cairn)).toBe(0);
    await cairn.resume("patient");
    await unloaded(cairn, "patient");
    expect(p.entered).toBe(2);
    await cairn.send("patient", "go", "now");
    expect(await run.result()).toBe("now");
    expect(p.bodies).toBe(1);
  });

  it("replays a run resumed elsewhere after a failure while parked here", async () => {
    // A cancel and resume by another process (a second Cairn on the same database, not running
    // anything) that changed what a replay reads: the failed step at the journal's end is dropped.
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const p = probe();
    let fail = true;
    const wf = cairn.workflow("flaky", async (ctx) => {
      p.entered++;
      await Promise.all([
        ctx.sleep("nap", 1_000),
        ctx
          .step("shaky", () => {
            if (fail) throw new Error("not yet");
            return ++p.bodies;
          })
          .catch(() => "caught"),
      ]);
      return ctx.step("after", () => "done");
    });
    await cairn.launch();
    await wf.start(undefined, { id: "flaky" });
    await unloaded(cairn, "flaky");
    expect(warmCount(cairn)).toBe(1);
    const other = env.cairn(db, { clock });
    await other.cancel("flaky");
    await other.resume("flaky");
    fail = false;
    // The failed step finished after the sleep began: resume deletes it, and it runs again on replay.
    await eventually(async () => (await storeOf(cairn).loadJournal("flaky")).some((r) => r.name === "shaky" && r.status === "succeeded"));
    expect(p.entered).toBe(2);
  });

  it("a fork of a parked run replays; the parked run itself still continues warm", async () => {
    const cairn = env.cairn(await env.database());
    const p = probe();
    const forked = probe();
    const wf = cairn.workflow("original", async (ctx) => {
      const mine = ctx.runId === "original" ? p : forked;
      mine.entered++;
      mine.replayingAfterWake.push(ctx.isReplaying);
      await ctx.step("one", () => 1);
      return ctx.recv("go");
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "original" });
    await unloaded(cairn, "original");
    const fork = await cairn.fork("original", { fromSeq: 1, id: "original-fork" });
    await unloaded(cairn, "original-fork");
    await cairn.send("original-fork", "go", "fork");
    expect(await fork.result()).toBe("fork");
    await cairn.send("original", "go", "original");
    expect(await run.result()).toBe("original");
    expect(p.entered).toBe(1);
    expect(p.replayingAfterWake).toEqual([false]);
    // The fork began by replaying the step it inherited (and went on from its own wait warm).
    expect(forked.replayingAfterWake).toEqual([true]);
  });

  it("replays a run that another executor moved on meanwhile", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const here = env.cairn(db, { clock, maxConcurrentRuns: 1 });
    const onHere = probe();
    const onThere = probe();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let blocking = false;
    const blocker = here.workflow("blocker", async (ctx) => {
      await ctx.step("hold", async () => {
        blocking = true;
        await released;
      });
    });
    const wf = here.workflow("hopper", sleeper(onHere));
    await here.launch();
    const run = await wf.start(3, { id: "hopper" });
    await unloaded(here, "hopper");
    expect(warmCount(here)).toBe(1);
    // This executor is full (the blocker holds its only slot): the wake-up goes to the other one.
    await blocker.start(undefined, { id: "blocker" });
    await eventually(() => blocking);
    const there = env.cairn(db, { clock });
    there.workflow("hopper", sleeper(onThere));
    await there.launch();
    // Past the wake-up and the grace a run parked by a live executor waits for it (PostgreSQL's ParkerFirst).
    clock.advance(1_000 + PARKER_GRACE_MS);
    await eventually(async () => (await storeOf(here).loadJournal("hopper")).some((r) => r.name === "nap-1"));
    await unloaded(there, "hopper");
    await there.shutdown();
    expect(onThere.entered).toBe(1);
    release();
    await eventually(async () => (await here.run("blocker").status()).status === "succeeded");
    // Back here: the parked execution (at nap-0) is stale, and the run replays.
    expect(await advanceUntilSettled(clock, run.result(), 1_000)).toBe(2);
    expect(onHere.entered).toBe(2);
    expect([onHere.bodies, onThere.bodies]).toEqual([2, 1]);
    expect((await storeOf(here).loadJournal("hopper")).filter((r) => r.name.startsWith("work-")).length).toBe(3);
  });

  it("keeps at most maxRuns runs; an evicted run replays", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock, warmRuns: { maxRuns: 1 } });
    const first = probe();
    const second = probe();
    const a = cairn.workflow("first", sleeper(first));
    const b = cairn.workflow("second", sleeper(second));
    await cairn.launch();
    const runA = await a.start(1, { id: "first" });
    await unloaded(cairn, "first");
    const runB = await b.start(1, { id: "second" });
    await unloaded(cairn, "second");
    expect(warmCount(cairn)).toBe(1);
    const [outA, outB] = await advanceUntilSettled(clock, Promise.all([runA.result(), runB.result()]), 1_000);
    expect([outA, outB]).toEqual([1, 1]);
    expect(first.entered).toBe(2); // evicted when the second parked: replayed
    expect(second.entered).toBe(1);
  });

  it("an executor serving a queue keeps its sleeping runs warm: its own bookkeeping does not disturb a run parking", async () => {
    // A dispatch pass reads which of the executor's executions still run; one that came while a
    // run's suspend was committing used to mark the run disturbed, and it replayed at its wake-up.
    const cairn = env.cairn(await env.database());
    cairn.queue("served", { workerConcurrency: 4 });
    const p = probe();
    const wf = cairn.workflow("napper", async (ctx: WorkflowContext, n: number) => {
      p.entered++;
      for (let i = 0; i < n; i++) {
        await ctx.step(`work-${i}`, () => ++p.bodies);
        await ctx.sleep(`nap-${i}`, 20);
      }
      return n;
    });
    await cairn.launch();
    const runs = await Promise.all(Array.from({ length: 12 }, (_, k) => wf.start(8, { id: `napper-${k}` })));
    expect(await Promise.all(runs.map((run) => run.result()))).toEqual(runs.map(() => 8));
    expect(p.bodies).toBe(12 * 8);
    expect(p.entered).toBe(12);
  });

  it("a run held warm wakes by a timer of its own, whatever became of its executor's one timer", async () => {
    // The executor's timer holds only the earliest wake-up it knows of, and on PostgreSQL it reads
    // only the first few of its version's: a warm run's own timer covers one it misses. Here the
    // executor's timer is never armed, and polls are a minute apart.
    const cairn = env.cairn(await env.database(), { pollIntervalMs: 600_000 });
    (runtimeOf(cairn) as unknown as { executor: { wakeAt: (time: number) => void } }).executor.wakeAt = () => undefined;
    const p = probe();
    const wf = cairn.workflow("napper", async (ctx: WorkflowContext) => {
      p.entered++;
      await ctx.sleep("nap", 150);
      return "rested";
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "napper" });
    expect(await run.result()).toBe("rested");
    expect(p.entered).toBe(1);
  }, 20_000);

  it("replays a run whose own code called an operation while it was parked", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    const p = probe();
    let timerFired = false;
    // Opened once the run is unloaded: a timer of 30 ms fired before the suspend committed on a
    // loaded machine, and the run parked warm having called nothing while parked.
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const wf = cairn.workflow("restless", async (ctx) => {
      p.entered++;
      await Promise.all([
        ctx.sleep("nap", 1_000),
        (async () => {
          // A promise of its own (allowed, docs/replay.md §5): it settles while the run is unloaded.
          await gate;
          timerFired = true;
          await ctx.step("late", () => ++p.bodies);
        })(),
      ]);
      return "rested";
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "restless" });
    await unloaded(cairn, "restless");
    openGate();
    await eventually(() => timerFired);
    await new Promise((resolve) => setImmediate(resolve));
    clock.advance(1_000);
    expect(await run.result()).toBe("rested");
    expect(p.entered).toBe(2);
    expect(p.bodies).toBe(1);
  });

  it("refuses a bad bound, naming it", async () => {
    const db = await env.database();
    expect(() => env.cairn(db, { warmRuns: { maxRuns: -1 } })).toThrow(InvalidSpecError);
    expect(() => env.cairn(db, { warmRuns: { maxRuns: 1.5 } })).toThrow(/warmRuns\.maxRuns/);
  });
});
