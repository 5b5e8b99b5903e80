import { hasToolCall, jsonSchema, Output, stepCountIs, tool, ToolLoopAgent, type ToolSet } from "ai";
import { MockLanguageModel, responseMessages } from "./sdk-matrix.js";
import { describe, expect, it } from "vitest";
import { InvalidSpecError, type Cairn } from "../../src/index.js";
import { toolContext, type AgentOutput } from "../../src/ai/index.js";
import { BACKENDS } from "../backends.js";
import { cairnFactory, eventually } from "../harness.js";
import { answer, plainText, toolCall, toolOutputs, toolThenAnswer } from "./scripted-model.js";
import { storeOf } from "../../src/internal.js";

const lookUpInput = jsonSchema<{ id: number }>({ type: "object", properties: { id: { type: "number" } }, required: ["id"] });

function lookUpTools(executions: number[]): ToolSet {
  return {
    lookUp: tool({
      description: "Look an order up",
      inputSchema: lookUpInput,
      execute: async ({ id }) => (executions.push(id), { id, totalCents: 4200 }),
    }),
    refund: tool({ description: "Refund an order", inputSchema: lookUpInput, execute: async ({ id }) => ({ refunded: id }) }),
  };
}

/** `cairn.agent` takes the ToolLoopAgent settings (or a ToolLoopAgent) and answers as the plain AI SDK does. */
describe.each(BACKENDS)("cairn.agent at parity with ToolLoopAgent on $name", (backend) => {
  const env = cairnFactory(backend);

  it("passes call settings, toolChoice, activeTools, providerOptions, stopWhen and callbacks to the loop", async () => {
    const cairn = env.cairn(await env.database());
    const model = toolThenAnswer("lookUp", { id: 42 });
    const stepsSeen: string[] = [];
    let finished: { text: string; steps: number } | undefined;
    const agent = cairn.agent("settings", {
      model,
      instructions: "You look orders up.",
      tools: lookUpTools([]),
      activeTools: ["lookUp"],
      toolChoice: "required",
      temperature: 0.25,
      maxOutputTokens: 321,
      topP: 0.5,
      seed: 7,
      stopSequences: ["STOP"],
      providerOptions: { mock: { flavour: "vanilla" } },
      stopWhen: hasToolCall("lookUp"),
      onStepFinish: (step) => void stepsSeen.push(step.finishReason),
      onFinish: (event) => void (finished = { text: event.text, steps: event.steps.length }),
    });
    await cairn.launch();
    const out = await (await agent.start({ prompt: "Order 42?" })).result();

    expect(model.doGenerateCalls).toHaveLength(1); // stopWhen: hasToolCall("lookUp") ended the loop after the first step
    const call = model.doGenerateCalls[0]!;
    expect(call).toMatchObject({
      temperature: 0.25,
      maxOutputTokens: 321,
      topP: 0.5,
      seed: 7,
      stopSequences: ["STOP"],
      providerOptions: { mock: { flavour: "vanilla" } },
      toolChoice: { type: "required" },
    });
    expect(call.tools?.map((t) => t.name)).toEqual(["lookUp"]);
    expect(call.prompt[0]).toEqual({ role: "system", content: "You look orders up." });
    expect(stepsSeen).toEqual(["tool-calls"]);
    expect(finished).toEqual({ text: "", steps: 1 });
    expect(out.finishReason).toBe("tool-calls");
    expect(out.toolCalls).toEqual([{ toolCallId: "call-lookUp", toolName: "lookUp", input: { id: 42 } }]);
    expect(out.toolResults).toEqual([{ toolCallId: "call-lookUp", toolName: "lookUp", input: { id: 42 }, output: { id: 42, totalCents: 4200 } }]);
  });

  it("records the model prepareStep picks, and returns reasoning, structured output and response.messages", async () => {
    const cairn = env.cairn(await env.database());
    const first = toolThenAnswer("lookUp", { id: 7 });
    const second = new MockLanguageModel({
      modelId: "second-model",
      doGenerate: async () =>
        answer([
          { type: "reasoning", text: "The order exists; a refund is due." },
          { type: "text", text: '{"verdict":"refund","cents":4200}' },
        ]),
    });
    const agent = cairn.agent("structured", {
      model: first,
      tools: lookUpTools([]),
      prepareStep: ({ stepNumber }) => (stepNumber === 1 ? { model: second } : undefined),
      output: Output.object({
        schema: jsonSchema<{ verdict: string; cents: number }>({
          type: "object",
          properties: { verdict: { type: "string" }, cents: { type: "number" } },
          required: ["verdict", "cents"],
        }),
      }),
    });
    await cairn.launch();
    const out: AgentOutput = await (await agent.start({ prompt: "Order 7?" }, { id: "structured" })).result();

    expect(out.output).toEqual({ verdict: "refund", cents: 4200 });
    expect(out.reasoning).toEqual(["The order exists; a refund is due."]);
    expect(out.reasoningText).toBe("The order exists; a refund is due.");
    expect(out.steps).toBe(2);
    expect(out.response.messages.map((m) => m.role)).toEqual(["assistant", "tool", "assistant"]);
    expect(first.doGenerateCalls).toHaveLength(1);
    expect(second.doGenerateCalls).toHaveLength(1);
    const calls = await storeOf(cairn).select<{ model_id: string }>("SELECT model_id FROM cairn_model_calls WHERE run_id = 'structured' ORDER BY seq");
    expect(calls.map((c) => c.model_id)).toEqual(["mock-model-id", "second-model"]);
  });

  it("runs a ToolLoopAgent passed directly, across a restart, to the plain AI SDK's answer", async () => {
    const db = await env.database();
    const executions: number[] = [];
    const plainAgent = new ToolLoopAgent({
      model: toolThenAnswer("lookUp", { id: 9 }),
      instructions: "You look orders up.",
      tools: lookUpTools([]),
      stopWhen: stepCountIs(4),
    });
    const plain = await plainAgent.generate({ prompt: "Order 9?" });

    const model = toolThenAnswer("lookUp", { id: 9 });
    const durable = new ToolLoopAgent({ model, instructions: "You look orders up.", tools: lookUpTools(executions), stopWhen: stepCountIs(4) });
    const first = env.cairn(db, { pollIntervalMs: 50 });
    const agent = first.agent("loop", durable, { permissions: { lookUp: "approve" } });
    await first.launch();
    await agent.start({ prompt: "Order 9?" }, { id: "loop" });
    const request = await eventually(async () => (await first.approvals.list({ runId: "loop" }))[0]);
    await first.shutdown();

    const second = env.cairn(db, { pollIntervalMs: 50 });
    second.agent("loop", durable, { permissions: { lookUp: "approve" } });
    await second.launch();
    await second.approvals.approve("loop", request.toolCallId, { by: "ops" });
    const out = await second.run<AgentOutput>("loop").result();

    expect(out.text).toBe(plain.text);
    expect(out.response.messages).toEqual(responseMessages(plain));
    expect(out.toolResults.map((r) => r.output)).toEqual(plain.steps.flatMap((s) => s.toolResults.map((r) => r.output)));
    expect(executions).toEqual([9]);
    expect(model.doGenerateCalls).toHaveLength(2);
  });

  it("lets agent tools reach ctx.memory and ctx.artifacts through toolContext(options)", async () => {
    const cairn = env.cairn(await env.database());
    const agent = cairn.agent("notes", {
      model: toolThenAnswer("note", { id: 3 }),
      tools: {
        note: tool({
          inputSchema: lookUpInput,
          execute: async ({ id }, options) => {
            const ctx = toolContext(options);
            const version = await ctx.memory.set("last-order", id);
            const ref = await ctx.artifacts.put(`order-${id}.txt`, `order ${id}`);
            return { version, artifact: ref.name };
          },
        }),
      },
    });
    await cairn.launch();
    const out = await (await agent.start({ prompt: "Note order 3" }, { id: "notes" })).result();
    expect(out.toolResults[0]!.output).toEqual({ version: 1, artifact: "order-3.txt" });
    const memory = await storeOf(cairn).select<{ agent: string; key: string }>("SELECT agent, key FROM cairn_memory");
    expect(memory).toEqual([{ agent: "notes", key: "last-order" }]);
    expect(() => toolContext({ toolCallId: "x", messages: [] } as unknown as Parameters<typeof toolContext>[0])).toThrow(
      /inside a tool run by cairn.agent or ctx.tools/,
    );
  });

  it("replays a tool's memory and artifact writes after a restart without writing them again", async () => {
    const db = await env.database();
    const model = new MockLanguageModel({
      doGenerate: async (call) => {
        const seen = toolOutputs(call).length;
        if (seen === 0) return answer([toolCall("note", { id: 5 })], "tool-calls");
        if (seen === 1) return answer([toolCall("lookUp", { id: 5 })], "tool-calls");
        return answer([{ type: "text", text: "noted and looked up" }]);
      },
    });
    const notes: number[] = [];
    const define = (cairn: Cairn) =>
      cairn.agent("noter", {
        model,
        tools: {
          ...lookUpTools([]),
          note: tool({
            inputSchema: lookUpInput,
            execute: async ({ id }, options) => {
              notes.push(id);
              const ctx = toolContext(options);
              return { version: await ctx.memory.set("order", id), artifact: (await ctx.artifacts.put("note.txt", `order ${id}`)).name };
            },
          }),
        },
        permissions: { lookUp: "approve" },
      });
    const first = env.cairn(db, { pollIntervalMs: 50 });
    const agent = define(first);
    await first.launch();
    await agent.start({ prompt: "Note order 5, then look it up" }, { id: "noter" });
    const request = await eventually(async () => (await first.approvals.list({ runId: "noter" }))[0]);
    await first.shutdown();

    const second = env.cairn(db, { pollIntervalMs: 50 });
    define(second);
    await second.launch();
    await second.approvals.approve("noter", request.toolCallId, { by: "ops" });
    const out = await second.run<AgentOutput>("noter").result();
    expect(out.text).toBe("noted and looked up");
    expect(out.toolResults[0]!.output).toEqual({ version: 1, artifact: "note.txt" });
    expect(notes).toEqual([5]);
    const versions = await storeOf(second).select<{ n: number }>("SELECT count(*) AS n FROM cairn_memory WHERE key = 'order'");
    expect(Number(versions[0]!.n)).toBe(1);
  });

  it("refuses what it cannot make durable, by name", () => {
    const cairn = env.cairn(":memory:");
    expect(() => cairn.agent("by-id", new ToolLoopAgent({ model: "openai/gpt-4o" }))).toThrow(InvalidSpecError);
    const withCallOptions = new ToolLoopAgent({ model: plainText("hi"), prepareCall: (o) => o });
    expect(() => cairn.agent("call-options", withCallOptions)).toThrow(/prepareCall/);
  });
});
