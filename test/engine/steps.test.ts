import { describe, expect, it } from "vitest";
import { NonDeterminismError, TerminalError, TimeoutError, UnserializableError } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { advanceUntilSettled, cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("steps on $name", (backend) => {
  const env = cairnFactory(backend);

  it("runs each step once and returns the workflow's output", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const calls: string[] = [];
    const wf = cairn.workflow("order", async (ctx, input: { sku: string }) => {
      const price = await ctx.step("price", () => {
        calls.push("price");
        return input.sku.length * 10;
      });
      return ctx.step("charge", ({ idempotencyKey }) => {
        calls.push("charge");
        return { charged: price, key: idempotencyKey };
      });
    });
    await cairn.launch();
    const run = await wf.start({ sku: "A1" }, { id: "order-A1" });
    expect(await run.result()).toEqual({ charged: 20, key: "order-A1:1" });
    expect(calls).toEqual(["price", "charge"]);
    expect(await run.status()).toEqual({ status: "succeeded" });
    const again = await wf.start({ sku: "A1" }, { id: "order-A1" });
    expect(await again.result()).toEqual({ charged: 20, key: "order-A1:1" });
    expect(calls).toEqual(["price", "charge"]);
  });

  it("replays recorded steps after a restart instead of running them again", async () => {
    const db = await env.database();
    const first = env.cairn(db);
    let gate!: () => void;
    const blocked = new Promise<void>((resolve) => (gate = resolve));
    const calls: string[] = [];
    const two = first.workflow("two", async (ctx) => {
      await ctx.step("a", () => calls.push("a"));
      await ctx.step("b", () => blocked);
      return "never here";
    });
    await first.launch();
    const handle = await two.start(undefined, { id: "r1" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await first.shutdown();
    gate();
    const second = env.cairn(db);
    second.workflow("two", async (ctx) => {
      await ctx.step("a", () => calls.push("a-again"));
      await ctx.step("b", () => calls.push("b"));
      return "done";
    });
    await second.launch();
    expect(await second.run(handle.id).result()).toBe("done");
    expect(calls).toEqual(["a", "b"]);
  });

  it("numbers concurrent steps in call order, whatever order they finish in", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("fanout", async (ctx) => {
      const delays = [30, 1, 15];
      return Promise.all(delays.map((ms, i) => ctx.step(`part-${i}`, () => new Promise((r) => setTimeout(() => r(ms), ms)))));
    });
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "fanout" })).result()).toEqual([30, 1, 15]);
    const journal = await storeOf(cairn).loadJournal("fanout");
    expect(journal.map((s) => [s.seq, s.name])).toEqual([
      [0, "part-0"],
      [1, "part-1"],
      [2, "part-2"],
    ]);
  });

  it("fails a run that calls something else than its journal recorded", async () => {
    const db = await env.database();
    const first = env.cairn(db);
    const wf = first.workflow("wf", async (ctx) => {
      await ctx.step("a", () => 1);
      await new Promise(() => undefined);
    });
    await first.launch();
    await wf.start(undefined, { id: "nd" });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await first.shutdown();
    const second = env.cairn(db);
    second.workflow("wf", async (ctx) => {
      await ctx.step("renamed", () => 1);
    });
    await second.launch();
    const error = await second
      .run("nd")
      .result()
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NonDeterminismError);
    expect((error as Error).name).toBe("NonDeterminismError");
    expect((error as Error).message).toContain("seq 0");
    expect((error as Error).message).toContain('"a"');
    expect((error as Error).message).toContain('"renamed"');
  });

  it("retries with backoff, honours shouldRetry and TerminalError, and times out attempts", async () => {
    // The backoff and the attempt timeout run on the Cairn's clock: a manual one, moved below.
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    let attempts = 0;
    let aborted = false;
    const wf = cairn.workflow("retry", async (ctx) => {
      const flaky = await ctx.step(
        "flaky",
        ({ attempt }) => {
          attempts = attempt;
          if (attempt < 3) throw new Error("try again");
          return attempt;
        },
        { retries: 5, backoff: { initialDelayMs: 1 } },
      );
      const terminal = await ctx
        .step(
          "terminal",
          () => {
            throw new TerminalError("no");
          },
          { retries: 5, backoff: { initialDelayMs: 1 } },
        )
        .catch((e: Error) => e.name);
      const refused = await ctx
        .step(
          "refused",
          () => {
            throw new Error("bad input");
          },
          { retries: 5, shouldRetry: (e) => !(e as Error).message.includes("bad") },
        )
        .catch((e: Error) => e.message);
      const slow = await ctx
        .step(
          "slow",
          ({ signal }) =>
            new Promise((_, reject) =>
              signal.addEventListener("abort", () => {
                aborted = true;
                reject(signal.reason);
              }),
            ),
          { timeoutMs: 20 },
        )
        .catch((e: Error) => e.name);
      return { flaky, terminal, refused, slow };
    });
    await cairn.launch();
    const out = await advanceUntilSettled(clock, (await wf.start(undefined)).result(), 5);
    expect(out).toEqual({ flaky: 3, terminal: "TerminalError", refused: "bad input", slow: "TimeoutError" });
    expect(attempts).toBe(3);
    expect(aborted).toBe(true);
    expect(new TimeoutError("x").code).toBe("TIMEOUT");
  });

  it("round-trips rich values and refuses values it cannot store", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const rich = {
      when: new Date(0),
      big: 2n ** 70n,
      map: new Map<string, unknown>([["a", new Set([1, 2])]]),
      bytes: new Uint8Array([1, 2, 3]),
      error: new RangeError("out"),
      nothing: undefined,
      nested: { $c: "not a tag" },
    };
    const wf = cairn.workflow("values", async (ctx) => {
      const value = await ctx.step("rich", () => rich);
      await ctx.step(
        "bad",
        () =>
          new (class Price {
            amount = 1;
          })(),
      );
      return value;
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "values" });
    const error = await run.result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnserializableError);
    expect((error as Error).message).toContain("run values seq 1");
    expect((error as Error).message).toContain("class Price");
    const journal = await storeOf(cairn).loadJournal("values");
    const { fromStored } = await import("../../src/store/value/index.js");
    const back = fromStored(journal[0]!.output) as typeof rich;
    expect(back.when).toEqual(new Date(0));
    expect(back.big).toBe(2n ** 70n);
    expect(back.map.get("a")).toEqual(new Set([1, 2]));
    expect(back.bytes).toEqual(new Uint8Array([1, 2, 3]));
    expect(back.error).toBeInstanceOf(Error);
    expect(back.error.name).toBe("RangeError");
    expect("nothing" in back).toBe(true);
    expect(back.nested).toEqual({ $c: "not a tag" });
  });
});
