import { describe, expect, it } from "vitest";
import { z } from "zod";
import { InvalidInputError, InvalidSpecError, RunNotFoundError } from "../../src/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { storeOf } from "../../src/internal.js";

describe.each(BACKENDS)("run lifecycle on $name", (backend) => {
  const env = cairnFactory(backend);

  it("resumes a failed run from its journal, re-running only the step that failed", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const calls: string[] = [];
    let broken = true;
    const wf = cairn.workflow("fragile", async (ctx) => {
      await ctx.step("a", () => calls.push("a"));
      await ctx.step("b", () => {
        calls.push("b");
        if (broken) throw new Error("downstream is down");
      });
      return ctx.step("c", () => calls.push("c"));
    });
    await cairn.launch();
    const run = await wf.start(undefined, { id: "fragile" });
    expect(await run.result().catch((e: Error) => e.message)).toBe("downstream is down");
    expect((await run.status()).status).toBe("failed");
    broken = false;
    expect(await run.resume()).toBe(true);
    expect(await run.result()).toBe(4);
    expect(calls).toEqual(["a", "b", "b", "c"]);
    expect(await cairn.resume("fragile")).toBe(false);
  });

  it("resumes a run whose failing step finished after a sibling in Promise.all", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    let broken = true;
    let attempts = 0;
    const wf = cairn.workflow("fanout-fail", async (ctx) =>
      Promise.all([
        ctx.step("slow-fails", async () => {
          attempts++;
          await new Promise((resolve) => setTimeout(resolve, 30));
          if (broken) throw new Error("service down");
          return "a";
        }),
        ctx.step("fast-ok", () => "b"),
      ]),
    );
    await cairn.launch();
    const run = await wf.start(undefined, { id: "fanout-fail" });
    await expect(run.result()).rejects.toThrow("service down");
    broken = false;
    await run.resume();
    expect(await run.result()).toEqual(["a", "b"]);
    expect(attempts).toBe(2);
  });

  it("refuses a child id that belongs to another run", async () => {
    const cairn = env.cairn(await env.database());
    const leaf = cairn.workflow("leaf", async () => "leaf");
    const stranger = await leaf.start(undefined, { id: "taken" });
    await cairn.launch();
    await stranger.result();
    const adopter = cairn.workflow("adopter", async (ctx) => (await ctx.child(leaf, undefined, { id: "taken" })).result());
    const error = await (await adopter.start(undefined)).result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidSpecError);
    expect((error as Error).message).toContain('id: "taken"');
  });

  it("resumes a cancelled run", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("waiter", async (ctx) => ctx.recv<string>("go"));
    await cairn.launch();
    const run = await wf.start(undefined, { id: "waiter" });
    await eventually(async () => (await run.status()).status === "waiting");
    await run.cancel();
    expect((await run.status()).status).toBe("cancelled");
    await run.resume();
    await cairn.send("waiter", "go", "now");
    expect(await run.result()).toBe("now");
  });

  it("forks a run: reuses the journal below fromSeq and executes from there", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const calls: string[] = [];
    const wf = cairn.workflow("pipeline", async (ctx, input: { n: number }) => {
      const a = await ctx.step("a", () => (calls.push("a"), input.n + 1));
      const b = await ctx.step("b", () => (calls.push("b"), a * 10));
      return ctx.step("c", () => (calls.push("c"), b + 5));
    });
    await cairn.launch();
    expect(await (await wf.start({ n: 1 }, { id: "orig" })).result()).toBe(25);
    const fork = await cairn.fork("orig", { fromSeq: 1, id: "forked" });
    expect(await fork.result()).toBe(25);
    expect(calls).toEqual(["a", "b", "c", "b", "c"]);
    const row = await storeOf(cairn).getRun("forked");
    expect([row?.forkedFrom, row?.forkedFromSeq]).toEqual(["orig", 1]);
    await expect(cairn.fork("orig", { fromSeq: -1 })).rejects.toBeInstanceOf(InvalidSpecError);
    await expect(cairn.fork("nope", { fromSeq: 0 })).rejects.toBeInstanceOf(RunNotFoundError);
    await expect(cairn.fork("orig", { fromSeq: 1, id: "forked" })).rejects.toThrow(/id: "forked"/);
    expect((await storeOf(cairn).loadJournal("forked")).length).toBe(3);
  });

  it("validates input with a Standard Schema and stores nothing when it is invalid", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("typed", async (_ctx, input: { sku: string; qty: number }) => input.qty, {
      input: z.object({ sku: z.string().min(1), qty: z.number().int().positive() }),
    });
    await cairn.launch();
    const error = await wf.start({ sku: "", qty: -1 }, { id: "bad" }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidInputError);
    expect((error as Error).message).toMatch(/sku.*qty|qty.*sku/s);
    await expect(cairn.run("bad").status()).rejects.toBeInstanceOf(RunNotFoundError);
    expect(await (await wf.start({ sku: "A1", qty: 2 })).result()).toBe(2);
  });

  it("refuses bad specs up front, naming the field and value", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    const wf = cairn.workflow("spec", async (ctx) => ctx.step("s", () => 1, { retries: -2 }));
    expect(() => cairn.workflow("spec", async () => 1)).toThrow(/name: "spec"/);
    await cairn.launch();
    const error = await (await wf.start(undefined)).result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidSpecError);
    expect((error as Error).message).toContain("retries: -2");
    await expect(wf.start(undefined, { timeoutMs: -5 })).rejects.toThrow(/timeoutMs: -5/);
  });
});
