import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { afterEach, describe, expect, it } from "vitest";
import { BudgetExceededError } from "../../src/index.js";
import { startMockLlm, type MockLlm } from "../../src/testing/mock-llm/index.js";
import type { MockScript } from "../../src/testing/mock-llm/script.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { storeOf } from "../../src/internal.js";

/** The lead asks two researchers at once, then answers; each researcher answers in one call. */
const SCRIPT: MockScript = {
  rules: [
    { match: { model: "researcher-model" }, reply: { content: "Found it: {{prompt}}" } },
    { match: { model: "lead-model", lastRole: "tool" }, reply: { content: "Both researchers reported." } },
    {
      match: { model: "lead-model", lastRole: "user" },
      reply: {
        toolCalls: [
          { name: "research", arguments: { prompt: "topic A" } },
          { name: "research", arguments: { prompt: "topic B" } },
        ],
      },
    },
  ],
};

describe.each(BACKENDS)("delegation on $name", (backend) => {
  const env = cairnFactory(backend);
  let llm: MockLlm | undefined;
  afterEach(async () => {
    await llm?.close();
    llm = undefined;
  });

  function agents(cairn: import("../../src/index.js").Cairn, url: string, leadBudget: { modelCalls?: number; tokens?: number }) {
    const provider = createOpenAICompatible({ name: "mock", baseURL: url });
    const researcher = cairn.agent("researcher", { model: provider.chatModel("researcher-model"), budget: { modelCalls: 5 } });
    const lead = cairn.agent("lead", {
      model: provider.chatModel("lead-model"),
      budget: leadBudget,
      agents: { research: { agent: researcher, description: "Researches a topic", budget: { modelCalls: 1 } } },
    });
    return { lead, researcher };
  }

  it("runs two sub-agents concurrently as child runs whose spending is charged to the parent too", async () => {
    llm = await startMockLlm({ script: SCRIPT });
    const cairn = env.cairn(await env.database());
    const { lead } = agents(cairn, llm.url, { modelCalls: 10 });
    await cairn.launch();
    const out = await (await lead.start({ prompt: "Research A and B" }, { id: "lead" })).result();
    expect(out.text).toBe("Both researchers reported.");
    const children = await storeOf(cairn).listRuns({ parentId: "lead" });
    expect(children.map((c) => [c.workflow, c.status])).toEqual([
      ["researcher", "succeeded"],
      ["researcher", "succeeded"],
    ]);
    const budgets = await storeOf(cairn).select<{ run_id: string; parent_run_id: string | null; model_calls_spent: number; model_calls_limit: number }>(
      "SELECT run_id, parent_run_id, model_calls_spent, model_calls_limit FROM cairn_budgets ORDER BY run_id",
    );
    const lead_ = budgets.find((b) => b.run_id === "lead")!;
    expect(Number(lead_.model_calls_spent)).toBe(4); // 2 of its own + 1 per researcher
    for (const child of budgets.filter((b) => b.run_id !== "lead")) {
      expect(child.parent_run_id).toBe("lead");
      expect(Number(child.model_calls_spent)).toBe(1);
      expect(Number(child.model_calls_limit)).toBe(1); // carved: min(own 5, granted 1)
    }
    const tree = await storeOf(cairn).query("SELECT count(*) AS n FROM cairn_costs WHERE root_id = 'lead'");
    expect(Number(tree.rows[0]!.n)).toBe(3);
  });

  it("never lets the tree overspend a shared budget by more than the calls in flight", async () => {
    llm = await startMockLlm({ script: SCRIPT });
    const cairn = env.cairn(await env.database());
    const { lead } = agents(cairn, llm.url, { modelCalls: 3 });
    await cairn.launch();
    const error = await (await lead.start({ prompt: "Research A and B" }, { id: "capped-lead" })).result().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BudgetExceededError);
    // 1 lead call + 2 concurrent researcher calls reach the limit of 3; the lead's next call never starts.
    expect(llm.requestCount()).toBe(3);
    const [row] = await storeOf(cairn).select<{ model_calls_spent: number }>("SELECT model_calls_spent FROM cairn_budgets WHERE run_id = 'capped-lead'");
    expect(Number(row!.model_calls_spent)).toBe(3);
  });
});
