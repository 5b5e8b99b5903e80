// The supervised team: a planner agent, two worker agents (each behind a small workflow that turns a
// failed tool into a crash) and a verifier agent, under supervisors, on a model served by
// `cairn mock-llm` (script.json). The workers' `search` tool is flaky: the first call for each topic
// in this process throws. Run: see README.md.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { tool } from "ai";
import { z } from "zod";
import { Cairn } from "cairn";

export function defineTeam(cairn, llmUrl) {
  const llm = createOpenAICompatible({ name: "mock", baseURL: llmUrl.endsWith("/v1") ? llmUrl : `${llmUrl}/v1` });
  const model = llm.chatModel("mock-1");

  const failedOnce = new Set();
  const search = tool({
    description: "Search the notes archive for a topic.",
    inputSchema: z.object({ topic: z.string() }),
    execute: async ({ topic }) => {
      // Flaky: the first search for each topic in this process fails.
      if (!failedOnce.has(topic)) {
        failedOnce.add(topic);
        throw new Error(`flaky search backend: timed out looking up "${topic}"`);
      }
      return { topic, notes: `three sources on ${topic.replace(/^Research /, "")}` };
    },
  });

  const planner = cairn.agent("planner", { model, system: "You plan research reports." });
  const researcher = cairn.agent("researcher", { model, system: "You research one topic with the search tool.", tools: { search } });
  const verifier = cairn.agent("verifier", { model, system: "You check research notes." });

  // A worker is an agent run behind a workflow that lets it crash when its tool failed: the
  // supervisor, not the worker, decides what happens next.
  const worker = cairn.workflow("worker", async (ctx, input) => {
    const out = await ctx.delegate(researcher, { prompt: `Research ${input.topic}` });
    if (out.text.startsWith("FAILED")) throw new Error(out.text);
    return out.text;
  });

  const workers = cairn.supervisor("workers", {
    strategy: "one_for_one",
    intensity: 3,
    periodMs: 60_000,
    children: [
      { id: "durable", workflow: worker, input: { topic: "durable execution" }, restart: "transient", shutdown: 2_000 },
      { id: "supervision", workflow: worker, input: { topic: "supervision trees" }, restart: "transient", shutdown: 2_000 },
    ],
  });

  return cairn.supervisor("team", {
    strategy: "rest_for_one",
    intensity: 2,
    periodMs: 60_000,
    children: [
      { id: "planner", workflow: planner, input: { prompt: "Plan a report on durable agents" }, restart: "transient" },
      { id: "workers", workflow: workers },
      { id: "verifier", workflow: verifier, input: { prompt: "Verify the notes" }, restart: "transient", shutdown: "brutal_kill" },
    ],
  });
}

export { Cairn };
