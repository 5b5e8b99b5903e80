import { describe, expect, it } from "vitest";
import type { Cairn, WorkflowContext } from "../../src/index.js";
import { runtimeOf, storeOf } from "../../src/internal.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

/**
 * A top-level sleep's end is not committed before the workflow goes on (JournalCore.ride): it lands
 * before the run's next operation, or with its suspend or finish. Cases found by review of the
 * first version, which lost it or let a later record land first.
 */
describe.each(BACKENDS)("a sleep's end on $name", (backend) => {
  const env = cairnFactory(backend);
  const loaded = (cairn: Cairn): string[] => (runtimeOf(cairn) as unknown as { executor: { loadedRunIds: string[] } }).executor.loadedRunIds;

  /**
   * Runs `body` in one process until its journal has `rows` rows (a ManualClock that never moves:
   * nothing falls due), stops it, and lets another process, a second later, finish the run.
   */
  const awayAndBack = async (id: string, body: (ctx: WorkflowContext) => Promise<string>, rows: number) => {
    const db = await env.database();
    const start = Date.now();
    const first = env.cairn(db, { clock: new ManualClock(start) });
    const wf = first.workflow(id, body);
    await first.launch();
    await wf.start(undefined, { id });
    await eventually(async () => (await storeOf(first).loadJournal(id)).length === rows);
    await first.shutdown();
    const second = env.cairn(db, { clock: new ManualClock(start + 1_000) });
    second.workflow(id, body);
    await second.launch();
    const result = await second.run(id).result();
    const journal = await storeOf(second).loadJournal(id);
    await second.shutdown();
    return { result, journal };
  };

  it("survives a refused send that would have carried it, and replays exactly", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const body = async (ctx: WorkflowContext) => {
      await ctx.sleep("nap", 1_000);
      try {
        await ctx.send("no-such-run", "t", 1);
      } catch {
        // refused: the destination does not exist
      }
      await ctx.sleep("again", 1_000);
      return "ok";
    };
    const first = env.cairn(db, { clock, replayStallMs: 300 });
    const wf = first.workflow("refused", body);
    await first.launch();
    const run = await wf.start(undefined, { id: "refused" });
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(1_000);
    await eventually(async () => (await storeOf(first).loadJournal("refused")).length === 3 && (await run.status()).status === "waiting");
    const journal = (await storeOf(first).loadJournal("refused")).map((row) => [row.name, row.completion]);
    expect(journal[0]).toEqual(["nap", 0]);
    await first.shutdown();
    // Another process replays it from the journal (nothing warm).
    const second = env.cairn(db, { clock, replayStallMs: 300 });
    second.workflow("refused", body);
    await second.launch();
    clock.advance(1_000);
    expect(await second.run("refused").result()).toBe("ok");
  });

  it("lands before a transaction that follows a turn of work that commits nothing", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    const store = storeOf(cairn);
    const seen: (number | null)[][] = [];
    const { transaction } = store;
    store.transaction = async (...args) => {
      await transaction.apply(store, args);
      // The journal the moment the transaction's record committed.
      seen.push((await store.loadJournal("turn")).map((row) => row.completion));
    };
    const wf = cairn.workflow("turn", async (ctx) => {
      await ctx.sleep("nap", 1_000);
      await new Promise((resolve) => setImmediate(resolve));
      await ctx.transaction("tx", (sql) => sql.query("SELECT 1 AS one"));
      return "done";
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "turn" });
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(1_000);
    expect(await run.result()).toBe("done");
    expect(seen).toEqual([[0, 1]]);
  });

  it("does not unload a run whose next operation waits for the sleep's end to land", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    const wf = cairn.workflow("mailer", async (ctx) => {
      // One branch waits on a durable wait; the other ends a sleep and then sends the message it
      // waits for. While the send lands the sleep's end, the run must not look idle and unload.
      const [mail] = await Promise.all([
        ctx.recv<string>("mail"),
        (async () => {
          await ctx.sleep("nap", 1_000);
          await ctx.send(ctx.runId, "mail", "hello");
        })(),
      ]);
      return mail;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "mailer" });
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(1_000);
    expect(await run.result()).toBe("hello");
  });

  it("keeps a run warm that waits on after one of two sleeps ended", async () => {
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    let entered = 0;
    const wf = cairn.workflow("two-naps", async (ctx) => {
      entered++;
      await Promise.all([ctx.sleep("a", 1_000), ctx.sleep("b", 5_000)]);
      return entered;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "two-naps" });
    const unloaded = () => eventually(async () => (await run.status()).status === "waiting" && !loaded(cairn).includes("two-naps"));
    await unloaded();
    clock.advance(1_000);
    // The first sleep's end went with the run's unload.
    await eventually(async () => (await storeOf(cairn).loadJournal("two-naps"))[0]?.completion === 0);
    await unloaded();
    clock.advance(4_000);
    expect(await run.result()).toBe(1);
  });

  /**
   * Found by the replay fuzzer (FUZZ_SEED=218008016 on PostgreSQL, program p1): a process killed
   * after its workflow saw two sleeps end, but before their ends landed, left them pending beside a
   * select whose timer fell due after them. Recovering, the first sleep's end rode with the run, and
   * the second sleep and the select both waited for it to land — through different promise chains,
   * so the select took its ordinal first and won the race the sleeps had won live. A receive's
   * timeout took its ordinal the same way.
   */
  it.each([
    { wait: "a select's timer", deadline: (ctx: WorkflowContext) => ctx.select("deadline", [{ timeoutMs: 28 }]) },
    { wait: "a receive's timeout", deadline: (ctx: WorkflowContext) => ctx.recv("deadline", { timeoutMs: 28 }) },
  ])("ends what fell due while the run was away in the order it fell due: two sleeps before $wait", async ({ deadline }) => {
    const body = async (ctx: WorkflowContext) =>
      Promise.race([Promise.all([ctx.sleep("short", 10), ctx.sleep("longer", 16)]).then(() => "the sleeps"), deadline(ctx).then(() => "the deadline")]);
    // All three wait, their times recorded and none ended; then every time passed: 10 and 16 ms fell due before 28.
    const { result, journal } = await awayAndBack("due", body, 3);
    expect(result).toBe("the sleeps");
    // The deadline's own look may have recorded its timer after them (a race does not cancel it).
    expect(journal.map((row) => [row.name, row.completion])).toEqual([
      ["short", 0],
      ["longer", 1],
      ["deadline", expect.toBeOneOf([null, 2])],
    ]);
  });

  it("ends a sleep called later, after recorded steps, before one called first whose time came after", async () => {
    // The second branch reaches its sleep only after three recorded steps are handed back, one a
    // turn: replaying, it gets there three turns after the first branch's sleep — whose time
    // (100 ms) came after its own (20 ms).
    const body = async (ctx: WorkflowContext) =>
      Promise.race([
        ctx.sleep("long", 100).then(() => "the long sleep"),
        (async () => {
          for (const name of ["one", "two", "three"]) await ctx.step(name, () => name);
          await ctx.sleep("short", 20);
          return "the short sleep";
        })(),
      ]);
    expect((await awayAndBack("later", body, 5)).result).toBe("the short sleep");
  });

  it("commits a sleep's end before the workflow sees it when another wait of the run is pending", async () => {
    // Found by the replay fuzzer (FUZZ_SEED=1785990684 on PostgreSQL, program p152): live, a 7 ms
    // sleep's end reached the workflow before a 2 ms one's (whose start was still committing), and
    // the crash lost both ends; the replay ended them in another order and the race had another
    // winner. An end seen beside other waits is in the journal before the workflow sees it.
    const clock = new ManualClock();
    const cairn = env.cairn(await env.database(), { clock });
    const store = storeOf(cairn);
    // The sleeps' ends committed so far, by seq.
    const ended: number[] = [];
    const { commit } = store;
    store.commit = async (...args) => {
      await commit.apply(store, args);
      for (const op of args[1]) if (op.type === "completion") ended.push(op.seq);
    };
    let seenWith: number[] | null = null;
    const wf = cairn.workflow("beside", async (ctx) => {
      const first = ctx.sleep("first", 10).then(() => {
        seenWith ??= [...ended];
        return "first";
      });
      return Promise.race([first, ctx.sleep("second", 20).then(() => "second")]);
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "beside" });
    await eventually(async () => (await storeOf(cairn).loadJournal("beside")).length === 2 && (await run.status()).status === "waiting");
    clock.advance(10);
    expect(await run.result()).toBe("first");
    // When the workflow saw the first sleep end, its end (seq 0) was in the journal already.
    expect(seenWith).toEqual([0]);
  });
});
