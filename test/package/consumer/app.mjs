// The consumer's application: a Cairn agent over ai@7's own v4 mock model. Each model call is
// appended to calls.log (the "provider's" bill, across processes). The first call asks for the
// `ship` tool; in the first process the tool prints `tool-started` and hangs there until the driver
// SIGKILLs the process. The second process recovers the run: the recorded model call is replayed
// (not made again), the tool runs, and the second model call answers.
import { appendFileSync, readFileSync } from "node:fs";
import { Cairn } from "cairn";
import { jsonSchema, tool } from "ai";
import { MockLanguageModelV4 } from "ai/test";

const phase = process.argv[2]; // "first" | "resume"
const calls = () => readFileSync("calls.log", "utf8").split("\n").filter(Boolean).length;
const usage = {
  inputTokens: { total: 5, noCache: 5, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 3, text: 3, reasoning: undefined },
};
const model = new MockLanguageModelV4({
  modelId: "consumer-model",
  doGenerate: async (options) => {
    appendFileSync("calls.log", `call ${process.pid}\n`);
    const answered = options.prompt.some((m) => m.role === "tool");
    return answered
      ? { content: [{ type: "text", text: "shipped order 7" }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] }
      : {
          content: [{ type: "tool-call", toolCallId: "call-1", toolName: "ship", input: JSON.stringify({ order: 7 }) }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage,
          warnings: [],
        };
  },
});

const cairn = new Cairn({ database: "app.db", leaseMs: 500, pollIntervalMs: 20 });
const shipper = cairn.agent("shipper", {
  model,
  tools: {
    ship: tool({
      inputSchema: jsonSchema({ type: "object", properties: { order: { type: "number" } }, required: ["order"] }),
      execute: async ({ order }) => {
        if (phase === "first") {
          console.log("tool-started");
          await new Promise(() => undefined); // killed here
        }
        return { order, shipped: true };
      },
    }),
  },
});
await cairn.launch();
if (phase === "first") await shipper.start({ prompt: "Ship order 7" }, { id: "ship-7" });
const out = await cairn.run("ship-7").result();
console.log(JSON.stringify({ text: out.text, calls: calls() }));
await cairn.shutdown();
