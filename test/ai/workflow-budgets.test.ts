import { generateText } from "ai";
import { describe, expect, it } from "vitest";
import { BudgetExceededError, InvalidSpecError, type Cairn } from "../../src/index.js";
import type { AgentContext, Budget } from "../../src/ai/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { plainText } from "./scripted-model.js";
import { storeOf } from "../../src/internal.js";

interface Spent {
  run_id: string;
  parent_run_id: string | null;
  tokens_spent: number;
  usd_spent: number;
  model_calls_spent: number;
}

/** Budgets for `ctx.model` in any workflow: checked before each call, charged in its transaction. */
describe.each(BACKENDS)("workflow budgets on $name", (backend) => {
  const env = cairnFactory(backend);

  async function spent(cairn: Cairn, runId: string): Promise<Spent[]> {
    const rows = await storeOf(cairn).select<Spent>(
      "SELECT run_id, parent_run_id, tokens_spent, usd_spent, model_calls_spent FROM cairn_budgets WHERE run_id LIKE $1 ORDER BY run_id",
      [`${runId}%`],
    );
    return rows.map((r) => ({
      ...r,
      tokens_spent: Number(r.tokens_spent),
      usd_spent: Number(r.usd_spent),
      model_calls_spent: Number(r.model_calls_spent),
    }));
  }

  /** Asks `calls` times; returns how many answered and the name of the error that stopped it. */
  async function ask(model: ReturnType<AgentContext["model"]>, calls: number): Promise<{ answered: number; error: string | null }> {
    let answered = 0;
    try {
      for (let i = 0; i < calls; i++) {
        await generateText({ model, prompt: `question ${i}`, maxRetries: 0 });
        answered++;
      }
      return { answered, error: null };
    } catch (error) {
      return { answered, error: (error as Error).name };
    }
  }

  it("gives a model handle a budget of its own: ctx.model(model, { budget })", async () => {
    const cairn = env.cairn(await env.database());
    const model = plainText("ok");
    const wf = cairn.workflow("handle", async (ctx) => {
      await generateText({ model: ctx.model(model, { budget: { modelCalls: 2 } }), prompt: "a", maxRetries: 0 });
      const budgeted = ctx.model(model, { budget: { modelCalls: 2 } });
      return ask(budgeted, 3);
    });
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "h" })).result()).toEqual({ answered: 2, error: "BudgetExceededError" });
    expect(model.doGenerateCalls).toHaveLength(3); // 1 through the first handle, 2 through the second
    expect(await spent(cairn, "h#")).toEqual([
      { run_id: "h#model-budget:0", parent_run_id: null, tokens_spent: 10, usd_spent: 0, model_calls_spent: 1 },
      { run_id: "h#model-budget:1", parent_run_id: null, tokens_spent: 20, usd_spent: 0, model_calls_spent: 2 },
    ]);
  });

  it("opens the run's budget with ctx.budget, for every model handle, and nests handle budgets in it", async () => {
    const cairn = env.cairn(await env.database());
    const model = plainText("ok");
    const wf = cairn.workflow("run-budget", async (ctx) => {
      const early = ctx.model(model); // made before the budget opens: still charged to it
      await ctx.budget({ tokens: 45 });
      const nested = ctx.model(model, { budget: { modelCalls: 10 } });
      const first = await ask(early, 2);
      const second = await ask(nested, 5);
      const again = await ctx.budget({ tokens: 1 }).catch((error: Error) => error.name);
      return { first, second, again };
    });
    await cairn.launch();
    const out = await (await wf.start(undefined, { id: "r" })).result();
    // 10 tokens a call: calls start while less than 45 are spent, so the fifth is refused.
    expect(out).toEqual({ first: { answered: 2, error: null }, second: { answered: 3, error: "BudgetExceededError" }, again: "InvalidSpecError" });
    expect(await spent(cairn, "r")).toEqual([
      { run_id: "r", parent_run_id: null, tokens_spent: 50, usd_spent: 0, model_calls_spent: 5 },
      { run_id: "r#model-budget:0", parent_run_id: "r", tokens_spent: 30, usd_spent: 0, model_calls_spent: 3 },
    ]);
  });

  it("charges usd with pricing, and refuses a usd budget without pricing", async () => {
    const cairn = env.cairn(await env.database());
    const model = plainText("ok");
    const priced = cairn.workflow("priced", async (ctx) =>
      ask(ctx.model(model, { budget: { usd: 15 }, pricing: { inputPerMillion: 1_000_000, outputPerMillion: 1_000_000 } }), 3),
    );
    const unpriced = cairn.workflow("unpriced", async (ctx) => ask(ctx.model(model, { budget: { usd: 1 } }), 1));
    const badBudget = cairn.workflow("bad-budget", async (ctx) => ask(ctx.model(model, { budget: { tokens: -1 } as Budget }), 1));
    await cairn.launch();
    expect(await (await priced.start(undefined, { id: "p" })).result()).toEqual({ answered: 2, error: "BudgetExceededError" });
    expect((await spent(cairn, "p#"))[0]).toMatchObject({ usd_spent: 20, model_calls_spent: 2 });
    await expect((await unpriced.start(undefined)).result()).rejects.toThrow(/a usd budget needs pricing/);
    await expect((await badBudget.start(undefined)).result()).rejects.toBeInstanceOf(InvalidSpecError);
  });

  it("charges each call once across a restart (replayed calls are not charged again)", async () => {
    const db = await env.database();
    const model = plainText("ok");
    const define = (cairn: Cairn) =>
      cairn.workflow("restart", async (ctx) => {
        const budgeted = ctx.model(model, { budget: { tokens: 1_000 } });
        await generateText({ model: budgeted, prompt: "before", maxRetries: 0 });
        await ctx.recv("go");
        await generateText({ model: budgeted, prompt: "after", maxRetries: 0 });
        return "done";
      });
    const first = env.cairn(db, { pollIntervalMs: 50 });
    const wf = define(first);
    await first.launch();
    const run = await wf.start(undefined, { id: "x" });
    await eventually(async () => (await run.status()).status === "waiting");
    await first.shutdown();

    const second = env.cairn(db, { pollIntervalMs: 50 });
    define(second);
    await second.launch();
    await second.send("x", "go", true);
    expect(await second.run("x").result()).toBe("done");
    expect(model.doGenerateCalls).toHaveLength(2);
    expect(await spent(second, "x")).toEqual([{ run_id: "x#model-budget:0", parent_run_id: null, tokens_spent: 20, usd_spent: 0, model_calls_spent: 2 }]);
  });

  it('asks for more with onBudgetExceeded: "ask", as an agent does', async () => {
    const cairn = env.cairn(await env.database(), { pollIntervalMs: 50 });
    const model = plainText("ok");
    const wf = cairn.workflow("ask-more", async (ctx) => ask(ctx.model(model, { budget: { modelCalls: 1 }, onBudgetExceeded: "ask" }), 2));
    await cairn.launch();
    const run = await wf.start(undefined, { id: "m" });
    const request = await eventually(async () => (await cairn.approvals.list({ runId: "m" }))[0]);
    expect(request).toMatchObject({ kind: "budget", toolName: "modelCalls" });
    await cairn.approvals.approve("m", request.toolCallId, { by: "finance" });
    expect(await run.result()).toEqual({ answered: 2, error: null });
  });

  it("fails the run with BudgetExceededError when the workflow does not catch it", async () => {
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("uncaught", async (ctx) => {
      const model = ctx.model(plainText("ok"), { budget: { modelCalls: 0 } });
      return (await generateText({ model, prompt: "hi", maxRetries: 0 })).text;
    });
    await cairn.launch();
    await expect((await wf.start(undefined)).result()).rejects.toBeInstanceOf(BudgetExceededError);
  });
});
