import type { LanguageModelV3GenerateResult, LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { simulateReadableStream } from "ai";
import type { AgentContext } from "../../src/ai/index.js";
import type { Cairn } from "../../src/index.js";
import { eventually, type cairnFactory } from "../harness.js";

/**
 * Live against replay: runs `body` in a workflow that then waits for a message; shuts that Cairn
 * down, opens another on the same database, sends the message, and lets the run replay from its
 * journal. Returns what `body` computed live and what it computed replayed (both in memory, so
 * errors and dates are compared as the workflow saw them), and the Cairn that replayed.
 */
export async function liveAndReplayed<T>(
  env: ReturnType<typeof cairnFactory>,
  name: string,
  body: (ctx: AgentContext) => Promise<T>,
): Promise<{ live: T; replayed: T; cairn: Cairn; database: string }> {
  const database = await env.database();
  const values: T[] = [];
  const workflow = async (ctx: AgentContext) => {
    values.push(await body(ctx));
    await ctx.recv("replay");
    return null;
  };
  const first = env.cairn(database);
  const started = first.workflow(name, workflow);
  await first.launch();
  await started.start(undefined, { id: name });
  await eventually(async () => (await first.run(name).status()).status === "waiting");
  await first.shutdown();
  const second = env.cairn(database);
  second.workflow(name, workflow);
  await second.launch();
  await second.send(name, "replay", null);
  await second.run(name).result();
  if (values.length !== 2) throw new Error(`expected one live and one replayed pass, got ${values.length}`);
  return { live: values[0]!, replayed: values[1]!, cairn: second, database };
}

export const USAGE: LanguageModelV3GenerateResult["usage"] = {
  inputTokens: { total: 3, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 2, text: undefined, reasoning: undefined },
};

export function textResult(text: string, extra: Partial<LanguageModelV3GenerateResult> = {}): LanguageModelV3GenerateResult {
  return { content: [{ type: "text", text }], finishReason: { unified: "stop", raw: "stop" }, usage: USAGE, warnings: [], ...extra };
}

export function streamOf(parts: LanguageModelV3StreamPart[]): { stream: ReadableStream<LanguageModelV3StreamPart> } {
  return { stream: simulateReadableStream({ chunks: parts, initialDelayInMs: null, chunkDelayInMs: null }) };
}

export const FINISH: LanguageModelV3StreamPart = { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: USAGE };
