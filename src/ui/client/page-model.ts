import { get } from "./api.js";
import { add, duration, h, json, link, runLink, status, time, usd } from "./dom.js";
import type { Params } from "./route.js";
import { table } from "./page-run.js";

interface ModelCall {
  runId: string;
  seq: number;
  provider: string;
  modelId: string;
  messages: { role: string; hash: string; message: unknown }[];
  sharedWithPrevious: number;
  previousSeq: number | null;
  nextSeq: number | null;
  response: unknown;
  finishReason: string | null;
  toolCalls: { seq: number; toolCallId: string; toolName: string; input: unknown; status: string; permission: string; decidedBy: string | null }[];
  usage: { inputTokens: number; outputTokens: number; totalTokens: number };
  costUsd: number;
  latencyMs: number;
  streamed: boolean;
  createdAt: number;
}

/** One model call: the prompt (its delta against the previous call marked), the response, tool calls, usage, cost and latency. */
export async function modelPage(root: HTMLElement, params: Params): Promise<void> {
  const [runId, seq] = [params.path[1]!, params.path[2]!];
  const call = await get<ModelCall>(`/runs/${encodeURIComponent(runId)}/models/${seq}`);
  const base = `#/model/${encodeURIComponent(runId)}/`;
  add(
    root,
    h("h1", {}, `Model call #${call.seq} · ${call.modelId}`),
    h(
      "div",
      { class: "card meta" },
      h("span", { class: "muted" }, "run"),
      h("span", {}, runLink(call.runId)),
      h("span", { class: "muted" }, "provider"),
      h("span", {}, call.provider),
      h("span", { class: "muted" }, "usage"),
      h("span", { "data-testid": "usage" }, `${call.usage.inputTokens} in · ${call.usage.outputTokens} out · ${call.usage.totalTokens} total tokens`),
      h("span", { class: "muted" }, "cost"),
      h("span", {}, usd(call.costUsd)),
      h("span", { class: "muted" }, "latency"),
      h("span", {}, duration(call.latencyMs), call.streamed ? " (streamed)" : ""),
      h("span", { class: "muted" }, "finish"),
      h("span", {}, call.finishReason ?? "—"),
      h("span", { class: "muted" }, "at"),
      h("span", {}, time(call.createdAt)),
    ),
    h(
      "div",
      { class: "actions" },
      call.previousSeq === null ? null : link(`${base}${call.previousSeq}`, `← call #${call.previousSeq}`),
      call.nextSeq === null ? null : link(`${base}${call.nextSeq}`, `call #${call.nextSeq} →`),
      link(`#/why/${encodeURIComponent(runId)}/${call.seq}`, "Why?"),
    ),
    h("h2", {}, "Tool calls requested"),
    call.toolCalls.length === 0
      ? h("p", { class: "muted" }, "None.")
      : table(
          ["Seq", "Tool", "Input", "Status", "Permission", "Decided by"],
          call.toolCalls.map((t) => [
            link(`#/why/${encodeURIComponent(runId)}/${t.seq}`, `#${t.seq}`),
            t.toolName,
            json(t.input),
            status(t.status),
            t.permission,
            t.decidedBy ?? "",
          ]),
        ),
    h("h2", {}, "Response"),
    json(call.response),
    h(
      "h2",
      {},
      `Prompt (${call.messages.length} messages`,
      call.previousSeq === null ? ")" : `; ${call.messages.length - call.sharedWithPrevious} new since call #${call.previousSeq})`,
    ),
    h(
      "div",
      { "data-testid": "prompt" },
      ...call.messages.map((m, i) =>
        h(
          "div",
          { class: `msg${i >= call.sharedWithPrevious && call.previousSeq !== null ? " delta" : ""}` },
          h("div", { class: "role" }, m.role, i >= call.sharedWithPrevious && call.previousSeq !== null ? h("span", { class: "muted" }, " · new") : null),
          json((m.message as { content?: unknown } | null)?.content ?? m.message),
        ),
      ),
    ),
  );
}
