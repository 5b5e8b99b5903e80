import { describe, expect, it } from "vitest";
import { CancelledError, TimeoutError, type ChildHandle } from "../../src/index.js";
import { storeOf } from "../../src/internal.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";

describe.each(BACKENDS)("ctx.select / ctx.race on $name", (backend) => {
  const env = cairnFactory(backend);

  it("returns the first child to end, recorded as one select entry, and the loser keeps running", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const quick = cairn.workflow("quick", async () => "quick done");
    const slow = cairn.workflow("slow", async (ctx) => ctx.recv<string>("go"));
    const parent = cairn.workflow("parent", async (ctx) => {
      const s = await ctx.child(slow, undefined, { id: "slow-1" });
      const q = await ctx.child(quick, undefined, { id: "quick-1" });
      const first = await ctx.select("first", { slow: s, quick: q });
      const second = await ctx.select("second", [s]);
      return { first, second };
    });
    await cairn.launch();
    const run = await parent.start(undefined, { id: "p" });
    await eventually(
      async () =>
        (
          await cairn
            .run("quick-1")
            .status()
            .catch(() => undefined)
        )?.status === "succeeded",
    );
    await eventually(async () => (await run.status()).status === "waiting");
    await cairn.send("slow-1", "go", "slow done");
    const out = await run.result();
    expect(out.first).toEqual({ key: "quick", kind: "child", childId: "quick-1", status: "succeeded", value: "quick done" });
    expect(out.second).toEqual({ key: 0, kind: "child", childId: "slow-1", status: "succeeded", value: "slow done" });
    const rows = await storeOf(cairn).query("SELECT seq, kind, name, status FROM cairn_steps WHERE run_id = 'p' AND kind = 'select' ORDER BY seq");
    expect(rows.rows.map((r) => [r.name, r.status])).toEqual([
      ["first", "succeeded"],
      ["second", "succeeded"],
    ]);
  });

  it("reports a failed child without throwing; race throws its error", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const bad = cairn.workflow("bad", async () => {
      throw new TypeError("boom");
    });
    const parent = cairn.workflow("parent", async (ctx) => {
      const a = await ctx.child(bad, undefined, { id: "bad-a" });
      const won = await ctx.select("exit", [a]);
      const b = await ctx.child(bad, undefined, { id: "bad-b" });
      try {
        await ctx.race("raced", [b]);
        return "no throw";
      } catch (error) {
        return { won: won.kind === "child" && won.status === "failed" && (won.error as Error).name, raced: (error as Error).name };
      }
    });
    await cairn.launch();
    expect(await (await parent.start(undefined, { id: "p" })).result()).toEqual({ won: "TypeError", raced: "TypeError" });
  });

  it("consumes a winning message exactly once and leaves a losing topic's message in the inbox", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("mailbox", async (ctx) => {
      const first = await ctx.select("first", { stop: { topic: "stop" }, work: { topic: "work" } });
      const rest = await ctx.recv(first.key === "stop" ? "work" : "stop");
      return { first, rest };
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "m" });
    await eventually(async () => (await run.status()).status === "waiting");
    await cairn.send("m", "work", { job: 1 });
    await cairn.send("m", "stop", "now");
    const out = await run.result();
    // Both may be in the inbox by the time the run looks: the first listed ready branch wins.
    expect(out.first.kind).toBe("message");
    const consumed = await storeOf(cairn).query("SELECT topic, consumed_by FROM cairn_messages WHERE run_id = 'm' ORDER BY topic");
    // Each message consumed once, by the operation that returned it (runId:seq of the select, then of the recv).
    expect(consumed.rows.map((r) => r.consumed_by).sort()).toEqual(["m:0", "m:1"]);
    if (out.first.key === "stop") {
      expect(out.first).toEqual({ key: "stop", kind: "message", topic: "stop", value: "now" });
      expect(out.rest).toEqual({ job: 1 });
    } else {
      expect(out.first).toEqual({ key: "work", kind: "message", topic: "work", value: { job: 1 } });
      expect(out.rest).toBe("now");
    }
  });

  it("lets a timer win at the deadline recorded when the select first waited, and race throws a TimeoutError", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const wf = cairn.workflow("timed", async (ctx) => {
      const won = await ctx.select("wait", { reply: { topic: "reply" }, timeout: { timeoutMs: 5_000 } });
      try {
        await ctx.race("again", [{ topic: "reply" }, { timeoutMs: 1_000 }]);
      } catch (error) {
        return { won, raced: error instanceof TimeoutError };
      }
      return { won, raced: false };
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "t" });
    await eventually(async () => (await run.status()).status === "waiting");
    const pending = await storeOf(cairn).query("SELECT status FROM cairn_steps WHERE run_id = 't' AND kind = 'select'");
    expect(pending.rows[0]!.status).toBe("pending");
    clock.advance(4_999);
    await new Promise((r) => setTimeout(r, 50));
    expect((await run.status()).status).toBe("waiting");
    clock.advance(1);
    await eventually(
      async () =>
        (await storeOf(cairn).query("SELECT count(*) AS n FROM cairn_steps WHERE run_id = 't' AND status = 'pending' AND name = 'again'")).rows[0]!.n == 1,
    );
    clock.advance(1_000);
    expect(await run.result()).toEqual({ won: { key: "timeout", kind: "timer" }, raced: true });
  });

  it("replays the recorded winner after an unload even when another branch is ready first by then", async () => {
    const db = await env.database();
    // Replay is what this is about: no warm continuation (test/engine/warm-runs.test.ts has those).
    const cairn = env.cairn(db, { warmRuns: { maxRuns: 0 } });
    const seen: unknown[] = [];
    const wf = cairn.workflow("replayer", async (ctx) => {
      const won = await ctx.select("pick", [{ topic: "a" }, { topic: "b" }]);
      seen.push(won.key);
      await ctx.recv("continue"); // unloads: the select replays from its record when this wakes
      return won;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "r" });
    await eventually(async () => (await run.status()).status === "waiting");
    await cairn.send("r", "b", "from b");
    await eventually(async () => seen.length === 1);
    await eventually(async () => (await run.status()).status === "waiting");
    await cairn.send("r", "a", "from a"); // now branch 0 is ready too: replay must still say b
    await cairn.send("r", "continue", 1);
    expect(await run.result()).toEqual({ key: 1, kind: "message", topic: "b", value: "from b" });
    // Live once, then once per replay: always the recorded winner.
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(new Set(seen)).toEqual(new Set([1]));
  });

  it("refuses bad branches with InvalidSpecError naming the field", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("bad-spec", async (ctx, which: number) => {
      if (which === 0) return ctx.select("none", []);
      if (which === 1) return ctx.select("neg", [{ timeoutMs: -1 }]);
      return ctx.select("odd", [{ nope: true } as never]);
    });
    await cairn.launch();
    for (const [which, field] of [
      [0, "branches"],
      [1, "timeoutMs"],
      [2, "branch"],
    ] as const) {
      await expect((await wf.start(which, { id: `bad-${which}` })).result()).rejects.toMatchObject({ name: "InvalidSpecError", field });
    }
  });
});

describe.each(BACKENDS)("cancelling one's own child on $name", (backend) => {
  const env = cairnFactory(backend);

  it("brutal_kill: cancels the child at once and reports it; its in-flight step's signal aborts", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    let aborted = false;
    const stuck = cairn.workflow("stuck", async (ctx) =>
      ctx.step(
        "forever",
        ({ signal }) => new Promise((_resolve, reject) => signal.addEventListener("abort", () => ((aborted = true), reject(signal.reason)))),
      ),
    );
    const parent = cairn.workflow("parent", async (ctx) => {
      const h: ChildHandle<unknown> = await ctx.child(stuck, undefined, { id: "stuck-1" });
      await ctx.step("started", async () => undefined);
      await ctx.sleep("let it start", 50);
      return h.cancel();
    });
    await cairn.launch();
    const exit = (await (await parent.start(undefined, { id: "p" })).result()) as { status: string; error: unknown };
    expect(exit.status).toBe("cancelled");
    expect(exit.error).toBeInstanceOf(CancelledError);
    expect((await cairn.run("stuck-1").status()).status).toBe("cancelled");
    await eventually(() => aborted);
  });

  it("a grace period lets a child that listens for the shutdown request end on its own", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const polite = cairn.workflow("polite", async (ctx) => {
      const won = await ctx.select("work-or-stop", { stop: { topic: "cairn:shutdown" }, work: { topic: "work" } });
      return won.key === "stop" ? "stopped cleanly" : "worked";
    });
    const parent = cairn.workflow("parent", async (ctx) => {
      const h = await ctx.child(polite, undefined, { id: "polite-1" });
      return h.cancel({ graceMs: 60_000 });
    });
    await cairn.launch();
    const exit = await (await parent.start(undefined, { id: "p" })).result();
    expect(exit).toEqual({ childId: "polite-1", status: "succeeded", value: "stopped cleanly" });
  });

  it("a grace period that runs out cancels the child", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const deaf = cairn.workflow("deaf", async (ctx) => ctx.recv("never"));
    const parent = cairn.workflow("parent", async (ctx) => {
      const h = await ctx.child(deaf, undefined, { id: "deaf-1" });
      return h.cancel({ graceMs: 2_000 });
    });
    await cairn.launch();
    const run = await parent.start(undefined, { id: "p" });
    await eventually(
      async () => (await storeOf(cairn).query("SELECT count(*) AS n FROM cairn_steps WHERE run_id = 'p' AND kind = 'select'")).rows[0]!.n == 1,
    );
    await eventually(async () => (await run.status()).status === "waiting");
    clock.advance(2_000);
    const exit = (await run.result()) as { status: string };
    expect(exit.status).toBe("cancelled");
    const kinds = await storeOf(cairn).query("SELECT kind, name FROM cairn_steps WHERE run_id = 'p' ORDER BY seq");
    expect(kinds.rows.map((r) => r.kind)).toEqual(["child", "send", "select", "child-cancel"]);
  });

  it("during a grace period the child's in-flight step is not aborted and its result commits; its signal aborts only if the grace ends first", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let abortedDuringStep: boolean | undefined;
    const busy = cairn.workflow("busy", async (ctx) => {
      await ctx.step("long", async ({ signal }) => {
        await gate;
        abortedDuringStep = signal.aborted;
        return "long done";
      });
      await ctx.recv("never"); // does not listen for the shutdown request
    });
    const parent = cairn.workflow("parent", async (ctx) => {
      const h = await ctx.child(busy, undefined, { id: "busy-1" });
      return h.cancel({ graceMs: 10_000 });
    });
    await cairn.launch();
    const run = await parent.start(undefined, { id: "p" });
    await eventually(
      async () => (await storeOf(cairn).query("SELECT status FROM cairn_steps WHERE run_id = 'p' AND kind = 'select'")).rows[0]?.status === "pending",
    );
    release();
    await eventually(
      async () => (await storeOf(cairn).query("SELECT status FROM cairn_steps WHERE run_id = 'busy-1' AND name = 'long'")).rows[0]?.status === "succeeded",
    );
    expect(abortedDuringStep).toBe(false);
    clock.advance(10_000);
    expect(((await run.result()) as { status: string }).status).toBe("cancelled");
  });
});
