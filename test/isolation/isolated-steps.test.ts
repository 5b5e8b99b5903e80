import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { IsolatedStepCrashedError, InvalidSpecError, TimeoutError, isolated, type WorkflowContext } from "../../src/index.js";
import { storeOf } from "../../src/internal.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { scratchDir } from "../scratch.js";
import { alive, poolProcesses } from "./pool-processes.js";

/**
 * Isolated steps in real processes (test/isolation/fixtures/tasks.mjs runs in them; the pool starts
 * dist/'s isolated-child.js, so build first). Every way a process can die fails that step alone:
 * the executor — this test's process — and the other runs go on.
 */

const TASKS = new URL("./fixtures/tasks.mjs", import.meta.url);
const task = (name: string) => isolated(TASKS, name);

interface Death {
  name: string;
  options: { timeoutMs?: number; maxMemoryMb?: number };
  expect: (error: unknown) => void;
}

const crashed = (reason: string, signal: unknown, exitCode: number | null) => (error: unknown) => {
  expect(error).toBeInstanceOf(IsolatedStepCrashedError);
  expect(error).toMatchObject({ code: "ISOLATED_STEP_CRASHED", reason, signal, exitCode });
};

const DEATHS: Death[] = [
  { name: "loopForever", options: { timeoutMs: 1_000 }, expect: (e) => expect(e).toBeInstanceOf(TimeoutError) },
  // V8 aborts (SIGABRT on Node 20–24); the reason, read from its report, is what counts.
  { name: "exhaustMemory", options: { maxMemoryMb: 32 }, expect: crashed("out-of-memory", expect.any(String), null) },
  // Buffers live outside V8's heap: the watchdog holds the resident size to maxMemoryMb + 128 MB.
  { name: "hoardBuffers", options: { maxMemoryMb: 32 }, expect: crashed("out-of-memory", "SIGKILL", null) },
  { name: "exitThree", options: {}, expect: crashed("exit", null, 3) },
  {
    name: "throwLater",
    options: {},
    expect: (e) => {
      crashed("uncaught-exception", null, 1)(e);
      expect((e as Error).cause).toBeInstanceOf(TypeError);
      expect(((e as Error).cause as Error).message).toBe("thrown from a timer");
    },
  },
  { name: "segfault", options: {}, expect: crashed("signal", "SIGSEGV", null) },
  { name: "abort", options: {}, expect: crashed("signal", "SIGABRT", null) },
];

describe.each(BACKENDS)("isolated steps on $name", (backend) => {
  const env = cairnFactory(backend);

  it("loop, out-of-memory (heap and Buffers), exit(3), async throw, SIGSEGV and abort each fail their step alone; other runs finish", async () => {
    const cairn = env.cairn(await env.database(), { isolation: { poolSize: 3 } });
    const victim = cairn.workflow("victim", async (ctx, input: { death: string }) => {
      const death = DEATHS.find((d) => d.name === input.death)!;
      return ctx.step(input.death, task(input.death).with({}), { isolation: "process", ...death.options });
    });
    const bystander = cairn.workflow("bystander", async (ctx: WorkflowContext, input: { n: number }) => {
      const here = await ctx.step("here", () => input.n + 1);
      const there = await ctx.step("there", task("double").with({ n: here }), { isolation: "process" });
      return (there as { doubled: number }).doubled;
    });
    await cairn.launch();
    const victims = await Promise.all(DEATHS.map((d) => victim.start({ death: d.name }, { id: `victim-${d.name}` })));
    const bystanders = await Promise.all([1, 2, 3, 4].map((n) => bystander.start({ n }, { id: `bystander-${n}` })));

    expect(await Promise.all(bystanders.map((run) => run.result()))).toEqual([4, 6, 8, 10]);
    for (const [i, run] of victims.entries()) {
      const death = DEATHS[i]!;
      const error = await run.result().then(
        () => null,
        (e: unknown) => e,
      );
      death.expect(error);
      expect(String((error as Error).message)).toContain(death.name);
      // Recorded like any step failure: the journal's row holds the error, rebuilt with its class.
      const rows = await storeOf(cairn).loadJournal(`victim-${death.name}`);
      expect(rows).toMatchObject([{ seq: 0, name: death.name, status: "failed" }]);
    }
    // The pool stayed within its size, and replaced what died.
    expect(poolProcesses().length).toBeLessThanOrEqual(3);
  });

  it("a crash is retried like any step failure, in a fresh process", async () => {
    const cairn = env.cairn(await env.database());
    const flaky = cairn.workflow("flaky", async (ctx) =>
      ctx.step("crash-once", task("crashUntil").with({ okAt: 2 }), { isolation: "process", retries: 2, backoff: { initialDelayMs: 1 } }),
    );
    await cairn.launch();
    const run = await flaky.start({}, { id: "flaky" });
    expect(await run.result()).toBe(2);
    expect(await storeOf(cairn).loadJournal("flaky")).toMatchObject([{ name: "crash-once", status: "succeeded", attempts: 2 }]);
  });

  it("values cross through the codec; a thrown error keeps its class and fields; a result the journal refuses fails the step", async () => {
    const cairn = env.cairn(await env.database());
    const values = cairn.workflow("values", async (ctx) => {
      const kept = (await ctx.step("recorded", task("recorded").with({ ledger: "/dev/null", tag: "t" }), { isolation: "process" })) as {
        at: Date;
        big: bigint;
      };
      const thrown = await ctx.step("fails", task("fails").with({ what: "input" }), { isolation: "process" }).catch((e: unknown) => e);
      const refused = await ctx.step("function", task("returnsFunction").with({}), { isolation: "process" }).catch((e: unknown) => e);
      return { at: kept.at, big: kept.big, thrown, refused };
    });
    await cairn.launch();
    const out = (await (await values.start({}, { id: "values" })).result()) as { at: Date; big: bigint; thrown: Error; refused: Error };
    expect(out.at).toEqual(new Date(0));
    expect(out.big).toBe(10n);
    expect(out.thrown).toBeInstanceOf(RangeError);
    expect(out.thrown).toMatchObject({ message: "bad input", statusCode: 422 });
    expect(out.refused).toMatchObject({ name: "UnserializableError" });
    expect(out.refused.message).toContain("value.f");
  });

  it("refuses, naming the field: a closure with isolation, maxMemoryMb without it, a module that is no file URL", async () => {
    const cairn = env.cairn(await env.database());
    const bad = cairn.workflow("bad", async (ctx, input: { which: string }) => {
      if (input.which === "closure") return ctx.step("c", () => 1, { isolation: "process" });
      if (input.which === "memory") return ctx.step("m", () => 1, { maxMemoryMb: 64 });
      return ctx.step("s", task("double").with({ n: 1 }), { isolation: "process", maxMemoryMb: 4 });
    });
    await cairn.launch();
    const failure = async (which: string) =>
      (await bad.start({ which }, { id: `bad-${which}` })).result().then(
        () => null,
        (e: unknown) => e as InvalidSpecError,
      );
    expect(await failure("closure")).toMatchObject({ name: "InvalidSpecError", field: "fn" });
    expect(await failure("memory")).toMatchObject({ name: "InvalidSpecError", field: "maxMemoryMb", value: 64 });
    expect(await failure("small")).toMatchObject({ name: "InvalidSpecError", field: "maxMemoryMb", value: 4 });
    expect(() => env.cairn(":memory:", { isolation: { poolSize: 0 } })).toThrow(/isolation\.poolSize/);
    expect(() => env.cairn(":memory:", { isolation: { execArgv: "--expose-gc" as never } })).toThrow(/isolation\.execArgv/);
    expect(() => isolated("./relative.js", "x")).toThrow(InvalidSpecError);
    expect(() => isolated(TASKS, "")).toThrow(/exportName/);
  });

  it("a timeout kills the process running the step; shutdown leaves no pool process behind", async () => {
    const cairn = env.cairn(await env.database(), { isolation: { poolSize: 2 } });
    const looping = cairn.workflow("looping", async (ctx) => {
      const warm = (await ctx.step("warm", task("double").with({ n: 1 }), { isolation: "process" })) as { pid: number };
      await ctx.step("loop", task("loopForever").with({}), { isolation: "process", timeoutMs: 500 }).catch(() => undefined);
      return warm.pid;
    });
    await cairn.launch();
    const pid = (await (await looping.start({}, { id: "looping" })).result()) as number;
    // The loop ran in the warm process (a pool of one idle process reuses it) and the timeout killed it.
    await eventually(() => !alive(pid));
    await eventually(() => poolProcesses().length > 0); // its replacement, warm
    const before = poolProcesses();
    await cairn.shutdown();
    expect(before.length).toBeGreaterThan(0);
    expect(before.filter(alive)).toEqual([]);
    expect(poolProcesses()).toEqual([]);
  });

  it("cancelling a run kills the process its isolated step is looping in", async () => {
    const cairn = env.cairn(await env.database(), { isolation: { poolSize: 1 } });
    const marker = join(scratchDir("cairn-isolation-"), "pid");
    const looping = cairn.workflow("cancelled", async (ctx) => ctx.step("loop", task("markThenLoop").with({ marker }), { isolation: "process" }));
    await cairn.launch();
    const run = await looping.start({}, { id: "cancelled" });
    const pid = await eventually(() => existsSync(marker) && readFileSync(marker, "utf8") !== "" && Number(readFileSync(marker, "utf8")));
    expect(alive(pid)).toBe(true);
    expect(await cairn.cancel("cancelled")).toEqual(["cancelled"]);
    await eventually(() => !alive(pid));
    expect(await run.status()).toMatchObject({ status: "cancelled" });
  });

  it("a pool of one queues concurrent steps and swaps its process for another heap limit", async () => {
    const cairn = env.cairn(await env.database(), { isolation: { poolSize: 1 } });
    const pids = cairn.workflow("pids", async (ctx, input: { limits: (number | null)[] }) => {
      const seen: number[] = [];
      for (const [i, limit] of input.limits.entries()) {
        const options = limit === null ? { isolation: "process" as const } : { isolation: "process" as const, maxMemoryMb: limit };
        seen.push(((await ctx.step(`s${i}`, task("double").with({ n: i }), options)) as { pid: number }).pid);
      }
      return seen;
    });
    await cairn.launch();
    const run = async (id: string, limits: (number | null)[]) => (await (await pids.start({ limits }, { id })).result()) as number[];
    // A step of another heap limit gets a process of its own, which replaces the idle one.
    const swaps = await run("swaps", [null, 64, 64, null]);
    expect(swaps[1]).toBe(swaps[2]);
    expect(swaps[1]).not.toBe(swaps[0]);
    expect(swaps[3]).not.toBe(swaps[1]);
    await eventually(() => !alive(swaps[0]!) && !alive(swaps[1]!));
    // Two runs at once share the one warm process: one step waits while the other runs.
    const [a, b] = await Promise.all([run("queued-a", [null, null]), run("queued-b", [null, null])]);
    expect(new Set([...a!, ...b!, swaps[3]])).toEqual(new Set([swaps[3]]));
    expect(poolProcesses().length).toBeLessThanOrEqual(1);
  });

  it("starts pool processes with the pool's execArgv, not this process's flags", async () => {
    const withGc = env.cairn(await env.database(), { isolation: { execArgv: ["--expose-gc"] } });
    const gc = withGc.workflow("gc", async (ctx) => ctx.step("gc", task("hasGc").with({}), { isolation: "process" }));
    await withGc.launch();
    expect(await (await gc.start({}, { id: "gc" })).result()).toBe(true);
    const plain = env.cairn(await env.database());
    const noGc = plain.workflow("gc", async (ctx) => ctx.step("gc", task("hasGc").with({}), { isolation: "process" }));
    await plain.launch();
    expect(await (await noGc.start({}, { id: "gc" })).result()).toBe(false);
  });
});
