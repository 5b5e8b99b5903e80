/**
 * The OpenAI chat-completions wire format, as far as the mock speaks it: reading a request, and
 * writing a `chat.completion`, the `chat.completion.chunk` events of a stream, and error bodies.
 * The shapes follow what `@ai-sdk/openai-compatible` parses (its OpenAICompatibleChatResponseSchema
 * and chunk schema).
 */

import { createHash } from "node:crypto";
import type { WireMessage } from "./conversation.js";
import type { RenderedReply } from "./responder.js";

export interface ChatRequest {
  model: string;
  messages: WireMessage[];
  stream: boolean;
  /** The names of the tools the request offers the model. */
  toolNames: string[];
}

/**
 * Every response's `created`: 2025-01-01T00:00:00Z. A fixed time keeps replays byte-identical; the
 * AI SDK reports it as the response timestamp.
 */
export const CREATED_SECONDS = 1_735_689_600;

/** A body that starts like a completion and stops mid-way: not JSON. */
export const MALFORMED_BODY = '{"id":"chatcmpl-malformed","object":"chat.completion","choices":[{"index":0,"message":{"role":"assist';

/** The request, or why it is not a chat-completions request. */
export function parseChatRequest(body: unknown): ChatRequest | string {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return "the body must be a JSON object";
  const raw = body as Record<string, unknown>;
  if (raw.model !== undefined && typeof raw.model !== "string") return "model must be a string";
  if (!Array.isArray(raw.messages)) return "messages must be an array";
  for (const [i, message] of (raw.messages as unknown[]).entries()) {
    if (message === null || typeof message !== "object" || typeof (message as { role?: unknown }).role !== "string") {
      return `messages[${i}] must be an object with a string role`;
    }
  }
  const toolNames: string[] = [];
  if (Array.isArray(raw.tools)) {
    for (const tool of raw.tools as unknown[]) {
      const name = (tool as { function?: { name?: unknown } } | null)?.function?.name;
      if (typeof name === "string") toolNames.push(name);
    }
  }
  return { model: typeof raw.model === "string" ? raw.model : "", messages: raw.messages as WireMessage[], stream: raw.stream === true, toolNames };
}

/** `chatcmpl-` and a hash of the model and messages: the same request gets the same id. */
export function responseId(request: ChatRequest): string {
  const hash = createHash("sha256")
    .update(JSON.stringify([request.model, request.messages]))
    .digest("hex");
  return `chatcmpl-${hash.slice(0, 24)}`;
}

export function completionBody(id: string, model: string, reply: RenderedReply): object {
  return {
    id,
    object: "chat.completion",
    created: CREATED_SECONDS,
    model,
    choices: [
      {
        index: 0,
        message: {
          role: "assistant",
          content: reply.content,
          ...(reply.toolCalls.length === 0
            ? {}
            : {
                tool_calls: reply.toolCalls.map((call) => ({ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } })),
              }),
        },
        finish_reason: reply.finishReason,
      },
    ],
    usage: reply.usage,
  };
}

/**
 * The events of a streamed reply, in order: the role; the content, a word per chunk; each tool call
 * as a chunk with its id and name, then its arguments in up to three pieces; the finish reason;
 * and the usage, in a chunk without choices. OpenAI sends usage only when the request sets
 * `stream_options.include_usage`; the mock always sends it, since the AI SDK's openai-compatible
 * provider asks only when created with `includeUsage: true`, and tests want the numbers either way.
 */
export function completionChunks(id: string, model: string, reply: RenderedReply): object[] {
  const base = { id, object: "chat.completion.chunk", created: CREATED_SECONDS, model };
  const chunk = (delta: object, finishReason: string | null = null): object => ({ ...base, choices: [{ index: 0, delta, finish_reason: finishReason }] });
  const chunks = [chunk({ role: "assistant", content: "" })];
  for (const word of words(reply.content ?? "")) chunks.push(chunk({ content: word }));
  reply.toolCalls.forEach((call, index) => {
    chunks.push(chunk({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] }));
    for (const piece of thirds(call.arguments)) chunks.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
  });
  chunks.push(chunk({}, reply.finishReason));
  chunks.push({ ...base, choices: [], usage: reply.usage });
  return chunks;
}

/** An OpenAI-style error body, which the AI SDK turns into an APICallError with this message. */
export function errorBody(message: string, type: string): object {
  return { error: { message, type, param: null, code: type } };
}

/** "Refunded order 42." → ["Refunded ", "order ", "42."]: joined, the text again. */
function words(text: string): string[] {
  return text === "" ? [] : text.split(/(?<=\s)(?=\S)/);
}

function thirds(text: string): string[] {
  const size = Math.max(1, Math.ceil(text.length / 3));
  const pieces: string[] = [];
  for (let start = 0; start < text.length; start += size) pieces.push(text.slice(start, start + size));
  return pieces;
}
