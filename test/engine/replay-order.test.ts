import { describe, expect, it } from "vitest";
import { InvalidSpecError, NonDeterminismError, type WorkflowContext } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Replay fidelity for concurrency and nesting (docs/replay.md): concurrent branches get back the
 * outcomes they had live whatever order replay resolves them in, and operations called inside a
 * step are journaled in the step's scope.
 */
describe.each(BACKENDS)("replay order on $name", (backend) => {
  const env = cairnFactory(backend);

  /** Two branches, each a step of its own latency and then an "ask" step that says whose it is. */
  async function twoBranches(ctx: WorkflowContext, latencies: { slow: number; fast: number }, asked: string[]) {
    const branch = async (who: "slow" | "fast") => {
      await ctx.step(who, () => pause(latencies[who]).then(() => who));
      return ctx.step("ask", () => {
        asked.push(who);
        return `${who}'s answer`;
      });
    };
    return Promise.all([branch("slow"), branch("fast")]);
  }

  it("gives concurrent branches their own outcomes after an unload (the branches do not swap)", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const asked: string[] = [];
    const wf = cairn.workflow("branches", async (ctx) => {
      const answers = await twoBranches(ctx, { slow: 150, fast: 20 }, asked);
      await ctx.sleep("nap", 30); // unloads; the run is replayed from its journal when it wakes
      return answers;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "branches-1" });
    expect(await run.result()).toEqual(["slow's answer", "fast's answer"]);
    expect(asked).toEqual(["fast", "slow"]);
  });

  it("gives concurrent branches their own outcomes after a restart, whatever the latencies are now", async () => {
    const db = await env.database();
    const first = env.cairn(db);
    const asked: string[] = [];
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const wf = first.workflow("branches", async (ctx) => {
      const answers = await twoBranches(ctx, { slow: 150, fast: 20 }, asked);
      await ctx.step("blocked", () => blocked);
      return answers;
    });
    await first.launch();
    const started = await wf.start(undefined, { id: "branches-2" });
    await eventually(async () => asked.length === 2);
    await first.shutdown();
    release();
    const second = env.cairn(db);
    // Replay with the latencies reversed: recorded steps do not run, and their order is the recorded one.
    second.workflow("branches", async (ctx) => {
      const answers = await twoBranches(ctx, { slow: 1, fast: 100 }, asked);
      await ctx.step("blocked", () => undefined);
      return answers;
    });
    await second.launch();
    expect(await second.run(started.id).result()).toEqual(["slow's answer", "fast's answer"]);
    expect(asked).toEqual(["fast", "slow"]);
  });

  it("journals operations called inside a step in the step's scope, and replays them", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const ran: string[] = [];
    const wf = cairn.workflow("nested", async (ctx) => {
      const tool = await ctx.step("tool", async () => {
        const inner = await ctx.step("inner", () => {
          ran.push("inner");
          return 41;
        });
        const at = await ctx.now();
        return { value: inner + 1, at };
      });
      await ctx.sleep("nap", 20);
      const after = await ctx.step("after", () => {
        ran.push("after");
        return "after";
      });
      return { tool, after };
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "nested-1" });
    const out = (await run.result()) as { tool: { value: number; at: number }; after: string };
    expect(out.tool.value).toBe(42);
    expect(out.after).toBe("after");
    expect(ran).toEqual(["inner", "after"]);
    const rows = await storeOf(cairn).select<{ seq: number; name: string; path: string | null }>(
      "SELECT seq, name, path FROM cairn_steps WHERE run_id = $1 ORDER BY seq",
      ["nested-1"],
    );
    // Operations inside the tool are journaled in its scope (its identity, then their occurrence).
    expect(rows.map((r) => [r.name, r.path])).toEqual([
      ["tool", null],
      ["inner", "|step:tool:#0#0"],
      ["now", "|step:tool:#0#0"],
      ["nap", null],
      ["after", null],
    ]);
  });

  it("replays the operations of a step cut short by a crash, and runs only what was not recorded", async () => {
    const db = await env.database();
    const first = env.cairn(db);
    const ran: string[] = [];
    const keys: string[] = [];
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const body = (block: () => Promise<void> | void) => async (ctx: WorkflowContext) => {
      return ctx.step("tool", async ({ idempotencyKey }) => {
        keys.push(idempotencyKey);
        const a = await ctx.step("charge", ({ idempotencyKey: inner }) => {
          ran.push(`charge ${inner}`);
          return 10;
        });
        await ctx.step("wait", () => block());
        return a * 2;
      });
    };
    const wf = first.workflow(
      "tool-crash",
      body(() => blocked),
    );
    await first.launch();
    const run = await wf.start(undefined, { id: "tool-crash-1" });
    await eventually(() => ran.length === 1);
    await first.shutdown();
    release();
    const second = env.cairn(db);
    second.workflow(
      "tool-crash",
      body(() => undefined),
    );
    await second.launch();
    expect(await second.run(run.id).result()).toBe(20);
    expect(ran).toEqual(["charge tool-crash-1:0/step:charge#0"]);
    expect(keys).toEqual(["tool-crash-1:0", "tool-crash-1:0"]);
  });

  it("fails a replay loudly when the code calls something else where the journal has a record", async () => {
    const db = await env.database();
    const first = env.cairn(db);
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const wf = first.workflow("changed", async (ctx) => {
      await ctx.step("a", () => 1);
      await ctx.step("b", () => blocked);
    });
    await first.launch();
    const run = await wf.start(undefined, { id: "changed-1" });
    await pause(100);
    await first.shutdown();
    release();
    const second = env.cairn(db, { replayStallMs: 300 });
    let ranRenamed = false;
    second.workflow("changed", async (ctx) => {
      await ctx.step("renamed", () => (ranRenamed = true));
    });
    await second.launch();
    const error = await second
      .run(run.id)
      .result()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NonDeterminismError);
    expect((error as Error).message).toMatch(/recorded step "a" at seq 0 as the next operation to complete.*called step "renamed"/);
    expect(ranRenamed).toBe(true); // a step of another name is new work; a model call of the same name with another prompt would wait
  });

  it("fails a replay loudly when the code no longer calls an operation whose outcome comes next", async () => {
    const db = await env.database();
    const first = env.cairn(db);
    const wf = first.workflow("dropped", async (ctx) => {
      const [a] = await Promise.all([ctx.step("a", () => pause(30).then(() => "a")), ctx.step("b", () => "b")]);
      await ctx.sleep("nap", 300);
      return a;
    });
    await first.launch();
    const run = await wf.start(undefined, { id: "dropped-1" });
    await eventually(async () => (await run.status()).status === "waiting");
    await first.shutdown();
    const second = env.cairn(db, { replayStallMs: 300 });
    // "b" completed first live; this code never calls it, and waits for "a" forever.
    second.workflow("dropped", async (ctx) => {
      const a = await ctx.step("a", () => "a");
      await ctx.sleep("nap", 300);
      return a;
    });
    await second.launch();
    const error = await second
      .run(run.id)
      .result()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NonDeterminismError);
    expect((error as Error).message).toMatch(/step "b" at seq 1 as the next operation to complete/);
  });

  it("refuses a durable operation inside ctx.transaction's function, at the call", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("tx-nested", async (ctx) => {
      try {
        await ctx.transaction("tx", async () => ctx.step("inner", () => 1));
        return "no error";
      } catch (error) {
        return error instanceof InvalidSpecError ? error.message : String(error);
      }
    });
    await cairn.launch();
    const out = await (await wf.start(undefined, { id: "tx-nested-1" })).result();
    expect(out).toMatch(/cannot be called inside ctx\.transaction/);
  });
});
