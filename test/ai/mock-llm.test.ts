import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { APICallError, generateText, stepCountIs, streamText, tool } from "ai";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import {
  BUILTIN_SCRIPTS,
  loadMockScript,
  type MockLlm,
  type MockLlmOptions,
  type MockScript,
  parseMockScript,
  REFUND_SCRIPT,
  startMockLlm,
} from "../../src/testing/mock-llm/index.js";
import { InvalidSpecError } from "../../src/index.js";
import { cli, expectOneLineError } from "../cli/cli.js";
import { scratchDir } from "../scratch.js";

/** The real AI SDK against the mock, over loopback HTTP: the mock's wire format is what it parses. */

const servers: MockLlm[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function serve(script: MockScript, options: Partial<MockLlmOptions> = {}): Promise<MockLlm> {
  const server = await startMockLlm({ script, ...options });
  servers.push(server);
  return server;
}

function modelOf(server: MockLlm) {
  return createOpenAICompatible({ name: "mock", baseURL: server.url }).chatModel("mock-1");
}

/** The refund agent's tools: plain functions that record their calls. */
function refundTools(calls: string[]) {
  return {
    lookUpOrder: tool({
      description: "Look up an order by its number",
      inputSchema: z.object({ id: z.number() }),
      execute: ({ id }) => {
        calls.push(`lookUpOrder ${id}`);
        return Promise.resolve({ id, status: "delivered", totalCents: 1000 + id });
      },
    }),
    refund: tool({
      description: "Refund an order",
      inputSchema: z.object({ id: z.number(), amountCents: z.number() }),
      execute: ({ id, amountCents }) => {
        calls.push(`refund ${id} ${amountCents}`);
        return Promise.resolve({ refundId: `re_${id}`, amountCents });
      },
    }),
  };
}

const GREETING: MockScript = { rules: [{ match: { contains: "hello" }, reply: { content: "Hi there, you said {{prompt}}." } }] };

describe("mock LLM, non-streaming", () => {
  it("answers text, with usage counted from characters and a deterministic id and time", async () => {
    const server = await serve(GREETING);
    const first = await generateText({ model: modelOf(server), prompt: "hello", maxRetries: 0 });
    expect(first.text).toBe("Hi there, you said hello.");
    expect(first.finishReason).toBe("stop");
    // "hello": 5 characters → 2 tokens; the reply's 25 characters → 7.
    expect([first.usage.inputTokens, first.usage.outputTokens, first.usage.totalTokens]).toEqual([2, 7, 9]);
    expect(first.response.modelId).toBe("mock-1");
    expect(first.response.timestamp.toISOString()).toBe("2025-01-01T00:00:00.000Z");
    const second = await generateText({ model: modelOf(server), prompt: "hello", maxRetries: 0 });
    expect(second.response.id).toBe(first.response.id);
    expect(second.response.id).toMatch(/^chatcmpl-[0-9a-f]{24}$/);
  });

  it("runs the refund agent's tool loop for any order number", async () => {
    const server = await serve(REFUND_SCRIPT);
    for (const orderId of [1042, 7, 987654]) {
      const calls: string[] = [];
      const result = await generateText({
        model: modelOf(server),
        prompt: `Please refund order ${orderId}, it arrived broken.`,
        tools: refundTools(calls),
        stopWhen: stepCountIs(5),
        maxRetries: 0,
      });
      const total = 1000 + orderId;
      expect(calls).toEqual([`lookUpOrder ${orderId}`, `refund ${orderId} ${total}`]);
      expect(result.steps).toHaveLength(3);
      expect(result.steps.map((step) => step.finishReason)).toEqual(["tool-calls", "tool-calls", "stop"]);
      expect(result.steps.map((step) => step.toolCalls.map((call) => call.toolCallId))).toEqual([["call_0_0"], ["call_1_0"], []]);
      expect(result.steps[1]!.toolCalls[0]!.input).toEqual({ id: orderId, amountCents: total });
      expect(result.text).toBe(`Refunded order ${orderId}: ${total} cents are on their way back to the original payment method.`);
    }
  });

  it("gives the same usage and tool calls when the conversation is replayed", async () => {
    const run = async () => {
      const server = await serve(REFUND_SCRIPT);
      const result = await generateText({
        model: modelOf(server),
        prompt: "Refund order 31",
        tools: refundTools([]),
        stopWhen: stepCountIs(5),
        maxRetries: 0,
      });
      return {
        usage: result.steps.map((step) => [step.usage.inputTokens, step.usage.outputTokens]),
        total: result.totalUsage.totalTokens,
        ids: result.steps.map((step) => step.response.id),
      };
    };
    const first = await run();
    expect(await run()).toEqual(first);
    // Step 1: "Refund order 31" (15 characters) → 4 tokens; the call's arguments {"id":31} (9) → 3.
    expect(first.usage[0]).toEqual([4, 3]);
  });

  it("lets the script override usage", async () => {
    const server = await serve({ rules: [{ reply: { content: "ok", usage: { promptTokens: 100, completionTokens: 7 } } }] });
    const plain = await generateText({ model: modelOf(server), prompt: "anything", maxRetries: 0 });
    expect([plain.usage.inputTokens, plain.usage.outputTokens, plain.usage.totalTokens]).toEqual([100, 7, 107]);
    const streamed = streamText({ model: modelOf(server), prompt: "anything", maxRetries: 0 });
    const usage = await streamed.usage;
    expect([usage.inputTokens, usage.outputTokens, usage.totalTokens]).toEqual([100, 7, 107]);
  });
});

describe("mock LLM, streaming", () => {
  it("streams text in several chunks, then the finish reason and usage", async () => {
    const server = await serve(GREETING);
    const result = streamText({ model: modelOf(server), prompt: "hello", maxRetries: 0 });
    const pieces: string[] = [];
    for await (const piece of result.textStream) pieces.push(piece);
    expect(pieces).toEqual(["Hi ", "there, ", "you ", "said ", "hello."]);
    expect(await result.finishReason).toBe("stop");
    const usage = await result.usage;
    expect([usage.inputTokens, usage.outputTokens, usage.totalTokens]).toEqual([2, 7, 9]);
    expect((await result.response).timestamp.toISOString()).toBe("2025-01-01T00:00:00.000Z");
    expect(server.requests()[0]!.stream).toBe(true);
  });

  it("streams tool calls with their arguments split across chunks, through the whole refund loop", async () => {
    const server = await serve(REFUND_SCRIPT);
    const calls: string[] = [];
    const result = streamText({
      model: modelOf(server),
      prompt: "Refund order 1042 please",
      tools: refundTools(calls),
      stopWhen: stepCountIs(5),
      maxRetries: 0,
    });
    const argumentDeltas = new Map<string, number>();
    for await (const part of result.fullStream) {
      if (part.type === "error") throw part.error;
      if (part.type === "tool-input-delta") argumentDeltas.set(part.id, (argumentDeltas.get(part.id) ?? 0) + 1);
    }
    expect(calls).toEqual(["lookUpOrder 1042", "refund 1042 2042"]);
    expect([...argumentDeltas.keys()]).toEqual(["call_0_0", "call_1_0"]);
    expect([...argumentDeltas.values()].every((count) => count > 1)).toBe(true);
    expect(await result.text).toBe("Refunded order 1042: 2042 cents are on their way back to the original payment method.");
    const steps = await result.steps;
    expect(steps.map((step) => step.usage.inputTokens)).toEqual(
      server.requests().map((r) => (r.reply.kind === "reply" ? r.reply.usage.promptTokens : -1)),
    );
  });
});

describe("mock LLM faults", () => {
  it("answers a scripted HTTP 500, which the SDK surfaces as an APICallError, then recovers after `times`", async () => {
    const server = await serve({ rules: [{ reply: { content: "fine now" }, fault: { status: 500, times: 1 } }] });
    const error = await generateText({ model: modelOf(server), prompt: "hi", maxRetries: 0 }).catch((e: unknown) => e);
    expect(APICallError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ statusCode: 500, isRetryable: true, message: "mock LLM: scripted HTTP 500 (rules[0], fault 1 of 1)" });
    const retried = await generateText({ model: modelOf(server), prompt: "hi", maxRetries: 0 });
    expect(retried.text).toBe("fine now");
    expect(server.requests().map((r) => r.reply.kind)).toEqual(["error", "reply"]);
  });

  it("falls through to the next rule once a reply-less fault is used up", async () => {
    const server = await serve({ rules: [{ fault: { status: 429, times: 2 } }, { reply: { content: "second rule" } }] });
    for (const status of [429, 429]) {
      await expect(generateText({ model: modelOf(server), prompt: "hi", maxRetries: 0 })).rejects.toMatchObject({ statusCode: status });
    }
    expect((await generateText({ model: modelOf(server), prompt: "hi", maxRetries: 0 })).text).toBe("second rule");
    expect(server.requests().map((r) => r.rule)).toEqual([0, 0, 1]);
  });

  it("holds a delayed answer until the client aborts, and close() ends pending delays", async () => {
    const controller = new AbortController();
    let secondArrived = (): void => undefined;
    const second = new Promise<void>((resolve) => (secondArrived = resolve));
    const server = await serve(
      { rules: [{ reply: { content: "too late" }, fault: { delayMs: 600_000 } }] },
      { onRequest: (request) => (request.n === 1 ? controller.abort() : secondArrived()) },
    );
    await expect(generateText({ model: modelOf(server), prompt: "hi", maxRetries: 0, abortSignal: controller.signal })).rejects.toMatchObject({
      name: "AbortError",
    });
    expect(server.requests()[0]).toMatchObject({ delayMs: 600_000, reply: { kind: "reply", content: "too late" } });

    // A client that does not give up: close() must not wait out the delay.
    const waiting = generateText({ model: modelOf(server), prompt: "hi", maxRetries: 0 }).catch((e: unknown) => e);
    await second;
    await server.close();
    expect(APICallError.isInstance(await waiting)).toBe(true);
  });

  it("sends a malformed body: non-streaming, an APICallError; streaming, an error part", async () => {
    const server = await serve({ rules: [{ fault: { malformed: true } }] });
    const error = await generateText({ model: modelOf(server), prompt: "hi", maxRetries: 0 }).catch((e: unknown) => e);
    expect(APICallError.isInstance(error)).toBe(true);
    expect(error).toMatchObject({ message: "Invalid JSON response", statusCode: 200 });

    const streamed = streamText({ model: modelOf(server), prompt: "hi", maxRetries: 0, onError: () => undefined });
    const types: string[] = [];
    for await (const part of streamed.fullStream) types.push(part.type);
    expect(types).toContain("error");
  });

  it("fails a request no rule matches, or whose placeholder cannot be filled, with HTTP 400 saying why", async () => {
    const server = await serve({ rules: [{ match: { lastRole: "user", contains: "refund" }, reply: { content: "order {{promptNumber}}" } }] });
    await expect(generateText({ model: modelOf(server), prompt: "what's up", maxRetries: 0 })).rejects.toMatchObject({
      statusCode: 400,
      message: 'mock LLM: no rule of the script matches this request (last message: user "what\'s up") and it has no "default" reply',
    });
    await expect(generateText({ model: modelOf(server), prompt: "refund my order", maxRetries: 0 })).rejects.toMatchObject({
      statusCode: 400,
      message: 'mock LLM: rules[0].reply: {{promptNumber}}: the last user message holds no number: "refund my order"',
    });
  });

  it("waits latencyMs before every answer, as the log records", async () => {
    const server = await serve({ latencyMs: 3, rules: [{ reply: { content: "a" }, fault: { delayMs: 4, times: 1 } }] });
    await generateText({ model: modelOf(server), prompt: "one", maxRetries: 0 });
    await generateText({ model: modelOf(server), prompt: "two", maxRetries: 0 });
    expect(server.requests().map((r) => r.delayMs)).toEqual([7, 3]);
    const overridden = await serve({ latencyMs: 3, rules: [{ reply: { content: "a" } }] }, { latencyMs: 0 });
    await generateText({ model: modelOf(overridden), prompt: "one", maxRetries: 0 });
    expect(overridden.requests()[0]!.delayMs).toBe(0);
  });
});

describe("mock LLM request log", () => {
  it("logs every request in memory and as JSON lines", async () => {
    const log = join(scratchDir("cairn-mock-llm-"), "requests.jsonl");
    const server = await serve(REFUND_SCRIPT, { log });
    await generateText({ model: modelOf(server), prompt: "Refund order 5", tools: refundTools([]), stopWhen: stepCountIs(5), maxRetries: 0 });
    const requests = server.requests();
    expect(server.requestCount()).toBe(3);
    expect(requests.map((r) => [r.n, r.model, r.stream, r.messageCount, r.rule])).toEqual([
      [1, "mock-1", false, 1, 2],
      [2, "mock-1", false, 3, 1],
      [3, "mock-1", false, 5, 0],
    ]);
    expect(requests.every((r) => r.toolNames.join() === "lookUpOrder,refund")).toBe(true);
    expect(requests[0]!.lastMessage).toEqual({ role: "user", preview: "Refund order 5" });
    expect(requests[2]!.lastMessage).toEqual({ role: "tool", preview: '{"refundId":"re_5","amountCents":1005}' });
    expect(requests[1]!.reply).toEqual({
      kind: "reply",
      finishReason: "tool_calls",
      content: null,
      toolCalls: [{ id: "call_1_0", name: "refund", arguments: '{"id":5,"amountCents":1005}' }],
      usage: expect.objectContaining({ completionTokens: 7 }) as unknown,
    });
    expect(requests[2]!.reply).toMatchObject({
      kind: "reply",
      finishReason: "stop",
      content: expect.stringMatching(/^Refunded order 5: 1005 cents/) as unknown,
    });
    expect(Date.parse(requests[0]!.at)).not.toBeNaN();
    const lines = readFileSync(log, "utf8").trimEnd().split("\n");
    expect(lines.map((line) => JSON.parse(line) as unknown)).toEqual(requests);
  });
});

describe("mock LLM scripts", () => {
  function invalid(script: unknown): string {
    try {
      parseMockScript(script, "test.json");
    } catch (error) {
      expect(error).toBeInstanceOf(InvalidSpecError);
      return (error as Error).message;
    }
    throw new Error("the script was accepted");
  }

  it("names the offending field and value", () => {
    expect(invalid({ rules: [{ match: { lastRole: "bot" }, reply: { content: "x" } }] })).toBe(
      'invalid rules[0].match.lastRole in test.json: "bot" — must be one of system, user, assistant, tool',
    );
    expect(invalid({ rules: [{ match: { lastrole: "user" }, reply: { content: "x" } }] })).toMatch(
      /^invalid rules\[0\]\.match\.lastrole in test\.json: "user" — unknown field/,
    );
    expect(invalid({ rules: [{ reply: { content: "order {{orderId}}" } }] })).toMatch(
      /^invalid rules\[0\]\.reply\.content in test\.json: "order \{\{orderId\}\}" — unknown placeholder \{\{orderId\}\}/,
    );
    expect(invalid({ rules: [{ reply: { toolCalls: [{ name: "t", arguments: { id: "{{nope}}" } }] } }] })).toMatch(
      /^invalid rules\[0\]\.reply\.toolCalls\[0\]\.arguments\.id in test\.json/,
    );
    expect(invalid({ rules: [{ fault: { status: 200 } }] })).toBe("invalid rules[0].fault.status in test.json: 200 — must be an integer ≥ 400");
    expect(invalid({ rules: [{ fault: { delayMs: 10 } }] })).toMatch(
      /^invalid rules\[0\]\.fault in test\.json: .* — a fault with only delayMs delays the rule's reply/,
    );
    expect(invalid({ rules: [{ match: { turn: 0 } }] })).toMatch(/a rule needs a reply, a fault, or both$/);
    expect(invalid({ rules: [{ match: { promptMatches: "(" }, reply: { content: "x" } }] })).toMatch(
      /^invalid rules\[0\]\.match\.promptMatches in test\.json: "\(" — not a regular expression/,
    );
    expect(invalid({ rule: [] })).toMatch(/^invalid script\.rule in test\.json/);
    expect(invalid({ rules: {} })).toBe("invalid rules in test.json: {} — must be an array of rules");
  });

  it("loads built-in scripts and files, and says what is wrong with a bad one", async () => {
    expect(await loadMockScript("builtin:refund")).toEqual(BUILTIN_SCRIPTS.refund);
    await expect(loadMockScript("builtin:nope")).rejects.toThrow(
      'invalid mock-LLM script: "builtin:nope" — no such built-in script; there is builtin:refund',
    );
    const dir = scratchDir("cairn-mock-llm-");
    writeFileSync(join(dir, "good.json"), JSON.stringify(GREETING));
    expect(await loadMockScript(join(dir, "good.json"))).toEqual(GREETING);
    writeFileSync(join(dir, "bad.json"), "{ rules: ");
    await expect(loadMockScript(join(dir, "bad.json"))).rejects.toThrow(/^invalid mock-LLM script file: ".*bad\.json" — not JSON/);
    await expect(loadMockScript(join(dir, "missing.json"))).rejects.toThrow(/— no such file/);
  });

  it("refuses an invalid script when the server starts", async () => {
    await expect(startMockLlm({ script: { rules: [{ reply: {} }] } })).rejects.toThrow(
      "invalid rules[0].reply in the mock LLM's script: {} — a reply needs content, toolCalls, or both",
    );
  });
});

/** The built CLI (`npm test` builds first), as a real process. */
describe("cairn mock-llm", () => {
  const MAIN = fileURLToPath(new URL("../../dist/cli/main.js", import.meta.url));

  it("reports a bad script in one line, exit code 1", async () => {
    const dir = scratchDir("cairn-mock-llm-");
    const script = join(dir, "script.json");
    writeFileSync(script, JSON.stringify({ rules: [{ match: { lastRole: "bot" }, reply: { content: "x" } }] }));
    expectOneLineError(await cli(["mock-llm", "--port", "0", "--script", script]), /invalid rules\[0\]\.match\.lastRole in .*script\.json: "bot"/);
    expectOneLineError(await cli(["mock-llm", "--script", join(dir, "missing.json")]), /no such file/);
    expectOneLineError(await cli(["mock-llm", "--port", "99999"]), /--port must be at most 65535/);
  });

  it("serves until SIGTERM", async () => {
    const child = spawn(process.execPath, [MAIN, "mock-llm", "--port", "0", "--script", "builtin:refund"], { env: { ...process.env, NO_COLOR: "1" } });
    let stdout = "";
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (data: Buffer) => {
        stdout += data.toString();
        const found = /listening on (http:\/\/127\.0\.0\.1:\d+\/v1)/.exec(stdout);
        if (found !== null) resolve(found[1]!);
      });
      child.once("exit", (code) => reject(new Error(`exited with ${code}: ${stdout}`)));
    });
    const model = createOpenAICompatible({ name: "mock", baseURL: url }).chatModel("mock-1");
    const result = await generateText({ model, prompt: "Refund order 77", tools: refundTools([]), stopWhen: stepCountIs(5), maxRetries: 0 });
    expect(result.text).toMatch(/^Refunded order 77: 1077 cents/);
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(stdout).toMatch(/#1 mock-1: user "Refund order 77" → lookUpOrder\(\{"id":77\}\)/);
  });
});
