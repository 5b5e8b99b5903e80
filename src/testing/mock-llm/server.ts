/**
 * A deterministic OpenAI-compatible chat-completions server on loopback, for Cairn's tests, demo
 * and benchmarks: `POST /v1/chat/completions`, plain or streamed, answered by a script (see
 * script.ts for its format, its placeholders and how usage is counted).
 */

import { appendFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { conversationOf, textOf } from "./conversation.js";
import { type Decision, Responder } from "./responder.js";
import { parseMockScript, type MockScript } from "./script.js";
import { type ChatRequest, completionBody, completionChunks, errorBody, MALFORMED_BODY, parseChatRequest, responseId } from "./wire.js";

export interface MockLlmOptions {
  /** 0 (the default) takes any free port; `MockLlm.port` says which. */
  port?: number;
  /** Loopback only: the mock is never reachable from another machine. */
  host?: "127.0.0.1";
  /** Validated with parseMockScript first, so a bad script fails here, naming the field. */
  script: MockScript;
  /** Wait this long before every answer; overrides the script's `latencyMs`. */
  latencyMs?: number;
  /** A file to append each logged request to, as one JSON line. */
  log?: string;
  /** Called with each logged request as it arrives (`cairn mock-llm` prints them). */
  onRequest?: (request: LoggedRequest) => void;
}

export interface MockLlm {
  /** The base URL for an OpenAI-compatible client, ending in `/v1`: `http://127.0.0.1:4010/v1`. */
  url: string;
  port: number;
  /** Every chat-completions request so far, in arrival order (a copy). */
  requests(): LoggedRequest[];
  requestCount(): number;
  /**
   * Stops listening, cuts open connections and ends pending delays (a client waiting on a
   * `delayMs` fault sees its connection close). Calling it again is harmless.
   */
  close(): Promise<void>;
}

/**
 * One chat-completions request and what the script made of it, logged when it arrives (a delayed
 * answer is logged before its delay). Requests that are not chat completions (a wrong path, a body
 * that is not JSON) are answered with an error and not logged.
 */
export interface LoggedRequest {
  /** 1 for the first request, 2 for the next, ... */
  n: number;
  /** When it arrived, ISO 8601: the one field that differs between replays. */
  at: string;
  model: string;
  stream: boolean;
  messageCount: number;
  /** The last message's role and the first 120 characters of its text. */
  lastMessage: { role: string; preview: string } | null;
  /** The tools the request offered the model. */
  toolNames: string[];
  /** The rule that answered: its index in `rules`, "default", or null when none matched. */
  rule: number | "default" | null;
  /** The wait before answering: latency plus any fault's delay. */
  delayMs: number;
  reply: ReplySummary;
}

export type ReplySummary =
  | {
      kind: "reply";
      finishReason: "stop" | "tool_calls";
      content: string | null;
      toolCalls: { id: string; name: string; arguments: string }[];
      usage: { promptTokens: number; completionTokens: number; totalTokens: number };
    }
  /** A scripted error status, or a request the script could not answer (HTTP 400). */
  | { kind: "error"; status: number; message: string }
  | { kind: "malformed"; status: number };

const PREVIEW_CHARS = 120;

export async function startMockLlm(options: MockLlmOptions): Promise<MockLlm> {
  const script = parseMockScript(options.script, "the mock LLM's script");
  const responder = new Responder(script, options.latencyMs ?? script.latencyMs ?? 0);
  const host = options.host ?? "127.0.0.1";
  const log: LoggedRequest[] = [];
  /** Ends each pending delay early; close() calls them all. */
  const pendingDelays = new Set<() => void>();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = new URL(req.url ?? "/", "http://mock").pathname;
    if (path !== "/v1/chat/completions" || req.method !== "POST") {
      return sendJson(res, 404, errorBody(`mock LLM: no route ${req.method} ${path}; it serves POST /v1/chat/completions`, "not_found"));
    }
    let body: unknown;
    try {
      body = JSON.parse(await readBody(req)) as unknown;
    } catch (error) {
      return sendJson(res, 400, errorBody(`mock LLM: the request body is not JSON: ${(error as Error).message}`, "invalid_request_error"));
    }
    const request = parseChatRequest(body);
    if (typeof request === "string") return sendJson(res, 400, errorBody(`mock LLM: ${request}`, "invalid_request_error"));
    const decision = responder.respond(conversationOf(request.model, request.messages));
    const entry = logEntry(log.length + 1, request, decision);
    log.push(entry);
    if (options.log !== undefined) appendFileSync(options.log, `${JSON.stringify(entry)}\n`);
    options.onRequest?.(entry);
    if (decision.delayMs > 0 && !(await delay(decision.delayMs, res))) return;
    answer(res, request, decision);
  }

  /** Resolves true after `ms`, or false as soon as the client goes away or the server closes. */
  function delay(ms: number, res: ServerResponse): Promise<boolean> {
    return new Promise((resolve) => {
      const finish = (elapsed: boolean): void => {
        clearTimeout(timer);
        res.off("close", cancel);
        pendingDelays.delete(cancel);
        resolve(elapsed);
      };
      const cancel = (): void => finish(false);
      const timer = setTimeout(() => finish(true), ms);
      res.on("close", cancel);
      pendingDelays.add(cancel);
    });
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, errorBody(`mock LLM: internal error: ${(error as Error).message}`, "mock_internal_error"));
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;

  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}/v1`,
    port,
    requests: () => log.map((entry) => structuredClone(entry)),
    requestCount: () => log.length,
    close() {
      closing ??= new Promise<void>((resolve, reject) => {
        for (const cancel of [...pendingDelays]) cancel();
        server.close((error) => (error === undefined ? resolve() : reject(error)));
        // Keep-alive connections (undici's fetch pools them) would hold close() open.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

function answer(res: ServerResponse, request: ChatRequest, decision: Decision): void {
  const { outcome } = decision;
  switch (outcome.kind) {
    case "error":
      return sendJson(res, outcome.status, errorBody(outcome.message, outcome.type));
    case "malformed":
      if (request.stream && outcome.status < 400) {
        res.writeHead(200, SSE_HEADERS).end(`data: ${MALFORMED_BODY}\n\ndata: [DONE]\n\n`);
      } else {
        res.writeHead(outcome.status, { "content-type": "application/json" }).end(MALFORMED_BODY);
      }
      return;
    case "reply": {
      const id = responseId(request);
      if (!request.stream) return sendJson(res, 200, completionBody(id, request.model, outcome.reply));
      const events = completionChunks(id, request.model, outcome.reply).map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`);
      res.writeHead(200, SSE_HEADERS).end(`${events.join("")}data: [DONE]\n\n`);
      return;
    }
  }
}

const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" };

function sendJson(res: ServerResponse, status: number, body: object): void {
  res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function logEntry(n: number, request: ChatRequest, decision: Decision): LoggedRequest {
  const last = request.messages.at(-1);
  return {
    n,
    at: new Date().toISOString(),
    model: request.model,
    stream: request.stream,
    messageCount: request.messages.length,
    lastMessage: last === undefined ? null : { role: last.role, preview: textOf(last.content).slice(0, PREVIEW_CHARS) },
    toolNames: request.toolNames,
    rule: decision.rule,
    delayMs: decision.delayMs,
    reply: summary(decision),
  };
}

function summary(decision: Decision): ReplySummary {
  const { outcome } = decision;
  if (outcome.kind === "error") return { kind: "error", status: outcome.status, message: outcome.message };
  if (outcome.kind === "malformed") return { kind: "malformed", status: outcome.status };
  const { reply } = outcome;
  return {
    kind: "reply",
    finishReason: reply.finishReason,
    content: reply.content,
    toolCalls: reply.toolCalls.map((call) => ({ ...call })),
    usage: { promptTokens: reply.usage.prompt_tokens, completionTokens: reply.usage.completion_tokens, totalTokens: reply.usage.total_tokens },
  };
}
