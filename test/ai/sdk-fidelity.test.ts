import { APICallError, type LanguageModelV3CallOptions, type LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { generateText, jsonSchema, streamText, tool, type ModelMessage } from "ai";
import { MockLanguageModel, responseMessages, withBodies } from "./sdk-matrix.js";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../backends.js";
import { cairnFactory } from "../harness.js";
import { FINISH, liveAndReplayed, streamOf, textResult } from "./fidelity-harness.js";
import { storeOf } from "../../src/internal.js";

function outage(statusCode: number, extra: Partial<ConstructorParameters<typeof APICallError>[0]> = {}): APICallError {
  return new APICallError({
    message: `provider said ${statusCode}`,
    url: "https://api.example.com/v1/chat?key=sk-in-the-url&mode=fast",
    requestBodyValues: { model: "m", messages: [{ role: "user", content: "hello" }] },
    statusCode,
    responseHeaders: { "retry-after-ms": "1", "x-request-id": "req-42", authorization: "Bearer sk-header" },
    responseBody: `{"error":"status ${statusCode}"}`,
    data: { reason: "overloaded", detail: [1, 2] },
    ...extra,
  });
}

/** What a caught error looks like to user code. */
function describeError(error: unknown) {
  const e = error as APICallError;
  return {
    isInstance: APICallError.isInstance(error),
    instanceOf: error instanceof APICallError,
    name: e.name,
    message: e.message,
    statusCode: e.statusCode,
    isRetryable: e.isRetryable,
    responseBody: e.responseBody,
    data: e.data,
    requestId: e.responseHeaders?.["x-request-id"],
  };
}

describe.each(BACKENDS)("AI SDK fidelity on $name", (backend) => {
  const env = cairnFactory(backend);

  it("point 3: a provider error comes back with its class and fields, live and on replay", async () => {
    const model = new MockLanguageModel({
      doGenerate: async () => {
        throw outage(400);
      },
    });
    const { live, replayed, cairn } = await liveAndReplayed(env, "p3-class", async (ctx) => {
      const error = await generateText({ model: ctx.model(model), prompt: "hello", maxRetries: 0 }).catch((e: unknown) => e);
      return { described: describeError(error), url: (error as APICallError).url, authorization: (error as APICallError).responseHeaders?.authorization };
    });
    const plain = describeError(
      await generateText({
        model: new MockLanguageModel({
          doGenerate: async () => {
            throw outage(400);
          },
        }),
        prompt: "hello",
        maxRetries: 0,
      }).catch((e: unknown) => e),
    );
    expect(live.described).toEqual(plain);
    expect(replayed.described).toEqual(plain);
    expect(plain).toMatchObject({ isInstance: true, instanceOf: true, statusCode: 400, isRetryable: false, requestId: "req-42" });
    expect(model.doGenerateCalls).toHaveLength(1); // the replay did not ask the provider
    // Credentials are never stored: the replayed error carries them redacted, and no row holds them.
    expect(replayed.url).toBe("https://api.example.com/v1/chat?key=%5Bredacted+by+cairn%5D&mode=fast");
    expect(replayed.authorization).toBe("[redacted by cairn]");
    const leaks = await storeOf(cairn).query(
      "SELECT count(*) AS n FROM cairn_steps WHERE error LIKE '%sk-in-the-url%' OR error LIKE '%sk-header%' OR output LIKE '%sk-header%'",
    );
    expect(Number(leaks.rows[0]!.n)).toBe(0);
  });

  it("point 3: with generateText's default maxRetries, a run that succeeded live succeeds on replay", async () => {
    let calls = 0;
    const model = new MockLanguageModel({
      doGenerate: async () => {
        calls++;
        if (calls <= 2) throw outage(503);
        return textResult("fine now");
      },
    });
    const { live, replayed, cairn } = await liveAndReplayed(env, "p3-retries", async (ctx) => {
      const result = await generateText({ model: ctx.model(model), prompt: "hello" });
      return { text: result.text, id: result.response.id };
    });
    expect(live.text).toBe("fine now");
    expect(replayed).toEqual(live);
    expect(calls).toBe(3);
    const journal = await storeOf(cairn).loadJournal("p3-retries");
    expect(journal.filter((s) => s.kind === "model").map((s) => s.status)).toEqual(["failed", "failed", "succeeded"]);
  });

  it("point 7: one retry layer — the SDK's by default, Cairn's when asked, never both; isRetryable honoured", async () => {
    const failing = (status: number) => {
      const model = new MockLanguageModel({
        doGenerate: async () => {
          throw outage(status);
        },
      });
      return model;
    };
    const sdkLayer = failing(503);
    const cairnLayer = failing(503);
    const notRetryable = failing(400);
    const { live } = await liveAndReplayed(env, "p7-layers", async (ctx) => {
      const sdk = await generateText({ model: ctx.model(sdkLayer), prompt: "a" }).catch((e: unknown) => (e as Error).name);
      const own = await generateText({ model: ctx.model(cairnLayer, { retries: 2 }), prompt: "b", maxRetries: 0 }).catch(
        (e: unknown) => (e as Error).name,
      );
      const once = await generateText({ model: ctx.model(notRetryable, { retries: 2 }), prompt: "c", maxRetries: 0 }).catch(
        (e: unknown) => (e as Error).name,
      );
      return [sdk, own, once];
    });
    expect(live).toEqual(["AI_RetryError", "AI_APICallError", "AI_APICallError"]);
    expect(sdkLayer.doGenerateCalls).toHaveLength(3); // 1 + maxRetries (2), not 3 × 3
    expect(cairnLayer.doGenerateCalls).toHaveLength(3); // 1 + retries (2)
    expect(notRetryable.doGenerateCalls).toHaveLength(1);
  });

  it("point 7: the caller's abortSignal reaches the provider combined with the step's, and an abort is never retried", async () => {
    const seen: AbortSignal[] = [];
    // The caller gives up once the call has reached the provider (a timer could fire before it did, on a loaded machine).
    let giveUp = () => {};
    const model = new MockLanguageModel({
      doGenerate: async (options: LanguageModelV3CallOptions) => {
        seen.push(options.abortSignal!);
        const aborted = new Promise<never>((_, reject) =>
          options.abortSignal!.addEventListener("abort", () => reject(options.abortSignal!.reason as Error)),
        );
        queueMicrotask(giveUp);
        return aborted;
      },
    });
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("p7-abort", async (ctx) => {
      const controller = new AbortController();
      giveUp = () => controller.abort(new DOMException("the caller gave up", "AbortError"));
      const error = await generateText({ model: ctx.model(model, { retries: 3 }), prompt: "hi", abortSignal: controller.signal, maxRetries: 0 }).catch(
        (e: unknown) => e,
      );
      return (error as Error).name;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined)).result()).toBe("AbortError");
    expect(model.doGenerateCalls).toHaveLength(1);
    expect(seen[0]!.aborted).toBe(true);
  });

  it("point 4: the response id and timestamp the provider omits are recorded and replayed (generate and stream)", async () => {
    const generating = new MockLanguageModel({ doGenerate: async () => textResult("hi") });
    const streaming = new MockLanguageModel({
      doStream: async () =>
        streamOf([
          { type: "stream-start", warnings: [] },
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "hi" },
          { type: "text-end", id: "t" },
          FINISH,
        ]),
    });
    const { live, replayed } = await liveAndReplayed(env, "p4-ids", async (ctx) => {
      const generated = await generateText({ model: ctx.model(generating), prompt: "a" });
      const streamed = streamText({ model: ctx.model(streaming), prompt: "b" });
      const response = await streamed.response;
      return { generated: generated.response, streamedId: response.id, streamedAt: response.timestamp, text: await streamed.text };
    });
    expect(live.generated.id).toMatch(/^aitxt-/);
    expect(live.streamedId).toMatch(/^aitxt-/);
    expect({ ...replayed, generated: { ...replayed.generated, body: undefined } }).toEqual({ ...live, generated: { ...live.generated, body: undefined } });
    expect(generating.doGenerateCalls).toHaveLength(1);
    expect(streaming.doStreamCalls).toHaveLength(1);
  });

  it("point 4: with ctx.generateId, the SDK's own ids (tool approval ids) replay — the AI SDK 6 approval flow across a durable wait", async () => {
    const executed: unknown[] = [];
    const refund = tool({
      inputSchema: jsonSchema<{ order: string }>({ type: "object", properties: { order: { type: "string" } }, required: ["order"] }),
      needsApproval: true,
      execute: async (input) => {
        executed.push(input);
        return { refunded: input.order };
      },
    });
    const model = new MockLanguageModel({
      doGenerate: [
        {
          content: [{ type: "tool-call", toolCallId: "call-1", toolName: "refund", input: '{"order":"42"}' }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage: textResult("").usage,
          warnings: [],
        },
        textResult("Refunded order 42."),
      ],
    });
    const database = await env.database();
    const body = async (ctx: import("../../src/ai/index.js").AgentContext) => {
      const recorded = ctx.model(model);
      const first = await generateText({ model: recorded, prompt: "refund order 42", tools: { refund }, _internal: { generateId: ctx.generateId } });
      const request = first.content.find((p) => p.type === "tool-approval-request");
      if (request === undefined) throw new Error("no approval request");
      await ctx.setEvent("approval-id", request.approvalId);
      const answer = await ctx.recv<{ approvalId: string; approved: boolean }>("approval");
      const messages: ModelMessage[] = [
        { role: "user", content: "refund order 42" },
        ...first.response.messages,
        { role: "tool", content: [{ type: "tool-approval-response", approvalId: answer!.approvalId, approved: answer!.approved }] },
      ];
      const second = await generateText({ model: recorded, messages, tools: { refund }, _internal: { generateId: ctx.generateId } });
      return second.text;
    };
    const first = env.cairn(database);
    const wf = first.workflow("p4-approval", body);
    await first.launch();
    await wf.start(undefined, { id: "p4-approval" });
    const approvalId = (await first.getEvent("p4-approval", "approval-id", { timeoutMs: 10_000 })) as string;
    await first.shutdown();
    const second = env.cairn(database);
    second.workflow("p4-approval", body);
    await second.launch();
    await second.send("p4-approval", "approval", { approvalId, approved: true });
    expect(await second.run("p4-approval").result()).toBe("Refunded order 42.");
    expect(executed).toEqual([{ order: "42" }]);
    expect(model.doGenerateCalls).toHaveLength(2);
  });

  it("point 4: stream part ids the SDK makes unique across steps replay with ctx.generateId", async () => {
    const step = (text: string, finish: LanguageModelV3StreamPart): LanguageModelV3StreamPart[] => [
      { type: "text-start", id: "txt-0" },
      { type: "text-delta", id: "txt-0", delta: text },
      { type: "text-end", id: "txt-0" },
      ...(finish.type === "finish" && finish.finishReason.unified === "tool-calls"
        ? [{ type: "tool-call", toolCallId: "c1", toolName: "noop", input: "{}" } as LanguageModelV3StreamPart]
        : []),
      finish,
    ];
    const model = new MockLanguageModel({
      doStream: [
        streamOf(
          step("first ", {
            type: "finish",
            finishReason: { unified: "tool-calls", raw: "tool_calls" },
            usage: FINISH.type === "finish" ? FINISH.usage : textResult("").usage,
          }),
        ),
        streamOf(step("second", FINISH)),
      ],
    });
    const noop = tool({ inputSchema: jsonSchema<Record<string, never>>({ type: "object", properties: {} }), execute: async () => "done" });
    const { live, replayed } = await liveAndReplayed(env, "p4-part-ids", async (ctx) => {
      const result = streamText({
        model: ctx.model(model),
        prompt: "go",
        tools: { noop },
        stopWhen: ({ steps }) => steps.length >= 2,
        _internal: { generateId: ctx.generateId },
      });
      const ids: string[] = [];
      for await (const part of result.fullStream) if (part.type === "text-start") ids.push(part.id);
      return ids;
    });
    expect(live).toHaveLength(2);
    expect(live[0]).toBe("txt-0");
    expect(live[1]).not.toBe("txt-0"); // made unique by the SDK, with ctx.generateId
    expect(replayed).toEqual(live);
  });

  it("point 6: an in-band stream error part ends with the partial text and finishReason error, as the plain SDK, live and on replay", async () => {
    const parts = (): LanguageModelV3StreamPart[] => [
      { type: "stream-start", warnings: [] },
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "Partial " },
      { type: "text-delta", id: "t", delta: "answer" },
      { type: "error", error: outage(529, { message: "overloaded mid-stream" }) },
    ];
    const run = async (model: MockLanguageModel) => {
      const errors: unknown[] = [];
      const result = streamText({ model, prompt: "go", onError: ({ error }) => void errors.push(describeError(error)) });
      const text = await result.text;
      return { text, finishReason: await result.finishReason, errors };
    };
    const plain = await run(new MockLanguageModel({ doStream: async () => streamOf(parts()) }));
    const model = new MockLanguageModel({ doStream: async () => streamOf(parts()) });
    const { live, replayed, cairn } = await liveAndReplayed(env, "p6-error", (ctx) => run(ctx.model(model) as MockLanguageModel));
    expect(plain).toMatchObject({ text: "Partial answer", finishReason: "error" });
    expect(live).toEqual(plain);
    expect(replayed).toEqual(plain);
    expect(model.doStreamCalls).toHaveLength(1);
    const kinds: string[] = [];
    for await (const chunk of cairn.stream("p6-error")) kinds.push(chunk.kind);
    expect(kinds).toEqual(["reset", "text", "text", "error", "finish"]);
  });

  it("point 6: a stream that breaks after parts reached the caller replays its parts and its break, as live", async () => {
    const breaking = () => ({
      stream: new ReadableStream<LanguageModelV3StreamPart>({
        start(controller) {
          controller.enqueue({ type: "text-start", id: "t" });
          controller.enqueue({ type: "text-delta", id: "t", delta: "Half an" });
          controller.error(outage(502, { message: "connection reset mid-stream" }));
        },
      }),
    });
    const run = async (model: MockLanguageModel) => {
      const errors: unknown[] = [];
      const result = streamText({ model, prompt: "go", onError: ({ error }) => void errors.push(describeError(error)) });
      const deltas: string[] = [];
      const ended = await (async () => {
        for await (const delta of result.textStream) deltas.push(delta);
        return "ended";
      })().catch((e: unknown) => `threw ${(e as Error).name}`);
      return { deltas, ended, errors };
    };
    const plain = await run(new MockLanguageModel({ doStream: async () => breaking() }));
    const model = new MockLanguageModel({ doStream: async () => breaking() });
    const { live, replayed } = await liveAndReplayed(env, "p6-break", (ctx) => run(ctx.model(model) as MockLanguageModel));
    expect(live).toEqual(plain);
    expect(replayed).toEqual(plain);
    expect(model.doStreamCalls).toHaveLength(1);
  });

  it("a crash-cut attempt's parts of every kind are replaced by the record (reset semantics)", async () => {
    const db = await env.database();
    const cairn = env.cairn(db);
    await storeOf(cairn).migrate();
    await storeOf(cairn).commit(null, [
      {
        type: "insert",
        table: "cairn_stream_chunks",
        values: { run_id: "cut-kinds", model_seq: 0, position: 1, kind: "reasoning", chunk: '{"text":"STALE","part":{"id":"r"}}', created_at: 1 },
      },
      {
        type: "insert",
        table: "cairn_stream_chunks",
        values: { run_id: "cut-kinds", model_seq: 0, position: 2, kind: "tool-input-delta", chunk: '{"text":"STALE","part":{"id":"x"}}', created_at: 1 },
      },
    ]);
    const model = new MockLanguageModel({
      doStream: async () =>
        streamOf([
          { type: "reasoning-start", id: "r" },
          { type: "reasoning-delta", id: "r", delta: "fresh" },
          { type: "reasoning-end", id: "r" },
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "done" },
          { type: "text-end", id: "t" },
          FINISH,
        ]),
    });
    const wf = cairn.workflow("cut-kinds", async (ctx) => streamText({ model: ctx.model(model), prompt: "go" }).text);
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "cut-kinds" })).result()).toBe("done");
    const chunks: [string, string][] = [];
    for await (const chunk of cairn.stream("cut-kinds")) chunks.push([chunk.kind, chunk.text]);
    expect(chunks).toEqual([
      ["reset", ""],
      ["reasoning", "fresh"],
      ["text", "done"],
      ["finish", ""],
    ]);
  });

  it("point 9: response headers and body recorded; request.body rebuilt on replay, credentials out, storage per turn flat", async () => {
    const turns = 12;
    const model = new MockLanguageModel({
      doGenerate: async (options: LanguageModelV3CallOptions) => ({
        ...textResult(`reply ${options.prompt.length} ${"x".repeat(300)}`),
        request: {
          body: {
            model: "m",
            api_key: "sk-body-secret",
            temperature: 0,
            messages: options.prompt.map((m) => ({ role: m.role, content: JSON.stringify(m.content) })),
          },
        },
        response: {
          headers: { "x-request-id": `req-${options.prompt.length}`, "set-cookie": "session=sk-cookie" },
          body: { id: "raw", usage: { total: 5 } },
        },
      }),
    });
    const { live, replayed, cairn } = await liveAndReplayed(env, "p9-records", async (ctx) => {
      const recorded = ctx.model(model);
      const messages: ModelMessage[] = [];
      const seen: unknown[] = [];
      for (let turn = 0; turn < turns; turn++) {
        messages.push({ role: "user", content: `question ${turn}: ${"y".repeat(400)}` });
        const result = await generateText({ model: recorded, messages, ...withBodies });
        messages.push(...responseMessages(result));
        seen.push({ request: result.request.body, headers: result.response.headers, body: result.response.body });
      }
      return seen;
    });
    expect(model.doGenerateCalls).toHaveLength(turns);
    const redacted = (live as { request: { api_key: string }; headers: Record<string, string> }[]).map((turn) => ({
      ...turn,
      request: { ...turn.request, api_key: "[redacted by cairn]" },
      headers: { ...turn.headers, "set-cookie": "[redacted by cairn]" },
    }));
    expect(replayed).toEqual(redacted);
    expect((live[turns - 1] as { request: { messages: unknown[] } }).request.messages).toHaveLength(2 * turns - 1);
    const leaks = await storeOf(cairn).query(
      "SELECT (SELECT count(*) FROM cairn_payloads WHERE body LIKE '%sk-body-secret%' OR body LIKE '%sk-cookie%') + (SELECT count(*) FROM cairn_steps WHERE output LIKE '%sk-%') AS n",
    );
    expect(Number(leaks.rows[0]!.n)).toBe(0);
    // Each turn's record is the same size whatever the history: the body is stored by reference.
    const sizes = await storeOf(cairn).query("SELECT length(output) AS n FROM cairn_journal WHERE run_id = 'p9-records' AND kind = 'model' ORDER BY seq");
    const bytes = sizes.rows.map((r) => Number(r.n));
    expect(bytes[turns - 1]!).toBeLessThan(bytes[1]! * 1.2);
  });

  it("point 9: concurrent loops whose provider reports request bodies replay to the same values (bodies are read at the call)", async () => {
    const reporting = (name: string, delayMs: number) =>
      new MockLanguageModel({
        modelId: name,
        doGenerate: async (options: LanguageModelV3CallOptions) => {
          await new Promise((resolve) => setTimeout(resolve, delayMs));
          return {
            ...textResult(`${name} answer ${options.prompt.length} ${"z".repeat(200)}`),
            request: { body: { messages: options.prompt.map((m) => ({ role: m.role, content: JSON.stringify(m.content) })) } },
          };
        },
      });
    const slow = reporting("slow", 30);
    const fast = reporting("fast", 1);
    const { live, replayed } = await liveAndReplayed(env, "p9-concurrent", async (ctx) => {
      const loop = async (model: MockLanguageModel, topic: string) => {
        const messages: ModelMessage[] = [];
        const out: unknown[] = [];
        for (let turn = 0; turn < 3; turn++) {
          messages.push({ role: "user", content: `${topic} ${turn} ${"q".repeat(300)}` });
          const result = await generateText({ model: ctx.model(model), messages, ...withBodies });
          messages.push(...responseMessages(result));
          out.push([result.text, (result.request.body as { messages: unknown[] }).messages.length]);
        }
        return out;
      };
      return Promise.all([loop(slow, "slow"), loop(fast, "fast")]);
    });
    expect(replayed).toEqual(live);
    expect(slow.doGenerateCalls.length + fast.doGenerateCalls.length).toBe(6);
  });

  it("point 9: raw chunks are recorded and replayed when the call asks for them, and only then", async () => {
    const parts = (): LanguageModelV3StreamPart[] => [
      { type: "stream-start", warnings: [] },
      { type: "raw", rawValue: { provider: "chunk-1" } },
      { type: "text-start", id: "t" },
      { type: "text-delta", id: "t", delta: "hi" },
      { type: "raw", rawValue: { provider: "chunk-2" } },
      { type: "text-end", id: "t" },
      FINISH,
    ];
    const model = new MockLanguageModel({ doStream: async () => streamOf(parts()) });
    const { live, replayed } = await liveAndReplayed(env, "p9-raw", async (ctx) => {
      const raws: unknown[] = [];
      const asked = streamText({ model: ctx.model(model), prompt: "a", includeRawChunks: true });
      for await (const part of asked.fullStream) if (part.type === "raw") raws.push(part.rawValue);
      const notAsked: unknown[] = [];
      const plain = streamText({ model: ctx.model(model), prompt: "b" });
      for await (const part of plain.fullStream) if (part.type === "raw") notAsked.push(part.rawValue);
      return { raws, notAsked };
    });
    expect(live).toEqual({ raws: [{ provider: "chunk-1" }, { provider: "chunk-2" }], notAsked: [] });
    expect(replayed).toEqual(live);
  });

  it("cairn.stream carries every part kind — reasoning, tool input, tool calls, tool results, text — and keeps text readers working", async () => {
    const model = new MockLanguageModel({
      doStream: [
        streamOf([
          { type: "stream-start", warnings: [] },
          { type: "reasoning-start", id: "r" },
          { type: "reasoning-delta", id: "r", delta: "Think about the weather." },
          { type: "reasoning-end", id: "r" },
          { type: "tool-input-start", id: "call-1", toolName: "weather" },
          { type: "tool-input-delta", id: "call-1", delta: '{"city":' },
          { type: "tool-input-delta", id: "call-1", delta: '"Oslo"}' },
          { type: "tool-input-end", id: "call-1" },
          { type: "tool-call", toolCallId: "call-1", toolName: "weather", input: '{"city":"Oslo"}' },
          {
            type: "finish",
            finishReason: { unified: "tool-calls", raw: "tool_calls" },
            usage: FINISH.type === "finish" ? FINISH.usage : textResult("").usage,
          },
        ]),
        streamOf([
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "Sunny in " },
          { type: "text-delta", id: "t", delta: "Oslo." },
          { type: "text-end", id: "t" },
          FINISH,
        ]),
      ],
    });
    const cairn = env.cairn(await env.database());
    const wf = cairn.workflow("every-kind", async (ctx) => {
      const weather = tool({
        inputSchema: jsonSchema<{ city: string }>({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
        execute: async ({ city }) => ({ city, sky: "sunny" }),
      });
      const result = streamText({
        model: ctx.model(model),
        prompt: "Weather in Oslo?",
        tools: ctx.tools({ weather }),
        stopWhen: ({ steps }) => steps.length >= 2,
      });
      return result.text;
    });
    await cairn.launch();
    expect(await (await wf.start(undefined, { id: "every-kind" })).result()).toBe("Sunny in Oslo.");
    const chunks: { kind: string; text: string; part?: Record<string, unknown> }[] = [];
    for await (const chunk of cairn.stream("every-kind")) chunks.push(chunk);
    expect(chunks.map((c) => c.kind)).toEqual([
      "reset",
      "reasoning",
      "tool-input-start",
      "tool-input-delta",
      "tool-input-delta",
      "tool-input-end",
      "tool-call",
      "finish",
      "tool-result",
      "reset",
      "text",
      "text",
      "finish",
    ]);
    expect(
      chunks
        .filter((c) => c.kind === "text")
        .map((c) => c.text)
        .join(""),
    ).toBe("Sunny in Oslo.");
    expect(chunks.find((c) => c.kind === "reasoning")!.text).toBe("Think about the weather.");
    expect(chunks.find((c) => c.kind === "tool-result")!.part).toEqual({
      toolCallId: "call-1",
      toolName: "weather",
      output: { city: "Oslo", sky: "sunny" },
    });
    expect(chunks.find((c) => c.kind === "tool-call")!.part).toMatchObject({ toolCallId: "call-1", toolName: "weather", input: '{"city":"Oslo"}' });
  });

  it("ctx.isReplaying (the engine's) tells an AI SDK callback such as onStepFinish that it runs again on replay", async () => {
    const model = new MockLanguageModel({ doGenerate: async () => textResult("ok") });
    const { live, replayed } = await liveAndReplayed(env, "replaying", async (ctx) => {
      const seen: [string, boolean][] = [["start", ctx.isReplaying]];
      await generateText({ model: ctx.model(model), prompt: "a", onStepFinish: () => void seen.push(["onStepFinish", ctx.isReplaying]) });
      await ctx.step("after", () => 1);
      return seen;
    });
    expect(live).toEqual([
      ["start", false],
      ["onStepFinish", false],
    ]);
    expect(replayed).toEqual([
      ["start", true],
      ["onStepFinish", true],
    ]);
  });
});
