import { get } from "./api.js";
import { add, h, runLink, status, usd } from "./dom.js";
import type { Params } from "./route.js";

/** The delegation tree below a run (agents and the sub-agents and workflows they started), with tokens and cost. */
export async function treePage(root: HTMLElement, params: Params): Promise<void> {
  const runId = params.path[1]!;
  const { tree, rootId } = await get<{
    rootId: string;
    tree: {
      id: string;
      workflow: string;
      status: string;
      depth: number;
      parentSeq: number | null;
      modelCalls: number;
      totalTokens: number;
      costUsd: number;
    }[];
  }>(`/runs/${encodeURIComponent(runId)}/tree`);
  add(
    root,
    h("h1", {}, "Delegation tree of ", h("span", { class: "mono" }, runId)),
    rootId === runId
      ? null
      : h("p", {}, "This run's root is ", runLink(rootId), " — ", h("a", { href: `#/tree/${encodeURIComponent(rootId)}` }, "see the whole tree"), "."),
    h(
      "ul",
      { class: "tree card", "data-testid": "tree" },
      ...tree.map((n) =>
        h(
          "li",
          { style: `padding-left:${n.depth * 24}px` },
          n.depth === 0 ? "" : "└ ",
          runLink(n.id),
          ` ${n.workflow} `,
          status(n.status),
          n.parentSeq === null || n.depth === 0 ? "" : h("span", { class: "muted" }, ` from seq ${n.parentSeq}`),
          h("span", { class: "muted" }, ` · ${n.modelCalls} model calls · ${n.totalTokens} tokens · ${usd(n.costUsd)}`),
        ),
      ),
    ),
  );
}
