import { describe, expect, it } from "vitest";
import { CancelledError, TimeoutError } from "../../src/index.js";
import { ManualClock } from "../../src/testing/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("child runs on $name", (backend) => {
  const env = cairnFactory(backend);

  it("starts a child under a stable id and returns its result; failures propagate", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const double = cairn.workflow("double", async (ctx, n: number) => ctx.step("x2", () => n * 2));
    const boom = cairn.workflow("boom", async (ctx) => {
      await ctx.step("explode", () => {
        throw new RangeError("kaboom");
      });
    });
    const parent = cairn.workflow("parent", async (ctx, n: number) => {
      const child = await ctx.child(double, n);
      const doubled = await child.result();
      const failure = await (await ctx.child(boom, undefined)).result().catch((e: Error) => `${e.name}: ${e.message}`);
      return { childId: child.id, doubled, failure };
    });
    await cairn.launch();
    const out = await (await parent.start(21, { id: "p" })).result();
    expect(out).toEqual({ childId: "p:0", doubled: 42, failure: "RangeError: kaboom" });
    const children = await storeOf(cairn).listRuns({ parentId: "p" });
    expect(children.map((c) => [c.id, c.workflow, c.status, c.rootId]).sort()).toEqual([
      ["p:0", "double", "succeeded", "p"],
      ["p:2", "boom", "failed", "p"],
    ]);
  });

  it("cancels a run together with its descendants", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const forever = cairn.workflow("forever", async (ctx) => ctx.recv("never"));
    const parent = cairn.workflow("holder", async (ctx) => (await ctx.child(forever, undefined)).result());
    await cairn.launch();
    const run = await parent.start(undefined, { id: "holder" });
    await eventually(
      async () =>
        (
          await cairn
            .run("holder:0")
            .status()
            .catch(() => undefined)
        )?.status === "waiting",
    );
    expect((await run.cancel()).sort()).toEqual(["holder", "holder:0"]);
    const error = await run.result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CancelledError);
    expect((await cairn.run("holder:0").status()).status).toBe("cancelled");
  });

  it("gives a child its parent's deadline", async () => {
    const clock = new ManualClock();
    const db = await env.database();
    const cairn = env.cairn(db, { clock });
    const sleeper = cairn.workflow("sleeper", async (ctx) => ctx.sleep("long", 60_000));
    const parent = cairn.workflow("bounded", async (ctx) => (await ctx.child(sleeper, undefined)).result());
    await cairn.launch();
    const run = await parent.start(undefined, { id: "bounded", timeoutMs: 5_000 });
    const child = await eventually(async () => (await storeOf(cairn).getRun("bounded:0"))?.deadlineAt);
    expect(child).toBe(clock.now() + 5_000);
    await eventually(async () => (await cairn.run("bounded:0").status()).status === "waiting");
    clock.advance(5_000);
    expect(await run.result().catch((e: unknown) => e)).toBeInstanceOf(TimeoutError);
    expect(
      await cairn
        .run("bounded:0")
        .result()
        .catch((e: unknown) => e),
    ).toBeInstanceOf(TimeoutError);
  });
});
