import { get } from "./api.js";
import { add, h, json, link, runLink, status, usd } from "./dom.js";
import type { Params } from "./route.js";

type Link =
  | {
      kind: "tool";
      seq: number;
      toolCallId: string;
      toolName: string;
      input: string | null;
      outputExcerpt: string | null;
      status: string;
      permission: string;
      decidedBy: string | null;
      reason: string | null;
    }
  | {
      kind: "model";
      seq: number;
      modelId: string;
      excerpt: string | null;
      finishReason: string | null;
      toolCallIds: string[];
      totalTokens: number;
      costUsd: number;
      latencyMs: number;
    }
  | { kind: "prompt"; hash: string; messages: { role: string; excerpt: string }[] }
  | { kind: "step"; seq: number; name: string; stepKind: string; status: string; output: unknown; error: string | null }
  | {
      kind: "run";
      runId: string;
      workflow: string;
      status: string;
      input: unknown;
      startedBy: { runId: string; seq: number | null; name: string | null } | null;
    };

/** Why did the agent do that: the step, the model response that asked for it, the prompt it saw, the run and its ancestors (`cairn why`). */
export async function whyPage(root: HTMLElement, params: Params): Promise<void> {
  const [runId, seq] = [params.path[1]!, params.path[2]!];
  const { chain } = await get<{ chain: Link[] }>(`/runs/${encodeURIComponent(runId)}/why/${seq}`);
  let runOfLink = runId;
  add(
    root,
    h("h1", {}, `Why: run `, h("span", { class: "mono" }, runId), ` seq ${seq}`),
    h(
      "ol",
      { class: "chain", "data-testid": "chain" },
      ...chain.map((l) => {
        const item = h("li", { "data-kind": l.kind }, h("span", { class: "kind" }, l.kind === "model" ? "model response" : l.kind));
        switch (l.kind) {
          case "tool":
            add(
              item,
              h("strong", {}, l.toolName),
              ` #${l.seq} `,
              status(l.status),
              ` · ${l.permission}`,
              l.decidedBy ? ` · decided by ${l.decidedBy}` : "",
              l.reason ? ` · “${l.reason}”` : "",
              json(l.input ?? ""),
              l.outputExcerpt ? h("div", { class: "muted" }, `→ ${l.outputExcerpt}`) : null,
            );
            break;
          case "model":
            add(
              item,
              link(`#/model/${encodeURIComponent(runOfLink)}/${l.seq}`, `${l.modelId} #${l.seq}`),
              ` · ${l.totalTokens} tokens · ${usd(l.costUsd)} · finish ${l.finishReason ?? "—"}`,
              l.excerpt ? json(l.excerpt) : null,
              l.toolCallIds.length > 0 ? h("div", { class: "muted mono" }, `tool calls: ${l.toolCallIds.join(", ")}`) : null,
            );
            break;
          case "prompt":
            add(
              item,
              `${l.messages.length} messages`,
              ...l.messages.slice(-6).map((m) => h("div", { class: "msg" }, h("span", { class: "role" }, `${m.role}: `), m.excerpt)),
            );
            break;
          case "step":
            add(item, h("strong", {}, l.name), ` #${l.seq} (${l.stepKind}) `, status(l.status), l.error ? json(l.error) : json(l.output));
            break;
          case "run":
            runOfLink = l.runId;
            add(
              item,
              runLink(l.runId),
              ` ${l.workflow} `,
              status(l.status),
              json(l.input),
              l.startedBy
                ? h("div", { class: "muted" }, "started by ", runLink(l.startedBy.runId), ` seq ${l.startedBy.seq ?? "?"} ${l.startedBy.name ?? ""}`)
                : null,
            );
            break;
        }
        return item;
      }),
    ),
  );
}
