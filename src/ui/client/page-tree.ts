import { get } from "./api.js";
import { add, h, runLink, status, usd } from "./dom.js";
import type { Params } from "./route.js";

interface TreeNode {
  id: string;
  workflow: string;
  status: string;
  depth: number;
  parentSeq: number | null;
  /** Set on a run a supervisor started: its child spec id, restarts before it, the last exit seen, its replacement. */
  supervisorId: string | null;
  childId: string | null;
  restartCount: number;
  lastExitReason: string | null;
  replacedBy: string | null;
  modelCalls: number;
  totalTokens: number;
  costUsd: number;
}

/**
 * The tree below a run: supervision (each child's spec, state, restart count, last exit reason and
 * the run that replaced it, as `cairn tree`) and delegation (agents, sub-agents and the workflows
 * they started, with tokens and cost).
 */
export async function treePage(root: HTMLElement, params: Params): Promise<void> {
  const runId = params.path[1]!;
  const { tree, rootId } = await get<{ rootId: string; tree: TreeNode[] }>(`/runs/${encodeURIComponent(runId)}/tree`);
  const supervised = tree.some((n) => n.childId !== null);
  add(
    root,
    h("h1", {}, supervised ? "Supervision tree of " : "Delegation tree of ", h("span", { class: "mono" }, runId)),
    rootId === runId
      ? null
      : h("p", {}, "This run's root is ", runLink(rootId), " — ", h("a", { href: `#/tree/${encodeURIComponent(rootId)}` }, "see the whole tree"), "."),
    h("ul", { class: "tree card", "data-testid": "tree" }, ...tree.map(node)),
  );
}

function node(n: TreeNode): HTMLElement {
  const muted = (text: string) => h("span", { class: "muted" }, text);
  return h(
    "li",
    { style: `padding-left:${n.depth * 24}px`, "data-run": n.id },
    n.depth === 0 ? "" : "└ ",
    runLink(n.id),
    ` ${n.workflow} `,
    status(n.status),
    n.childId === null ? null : h("span", { class: "child", "data-testid": "child" }, ` child ${n.childId} · restarts ${n.restartCount}`),
    n.lastExitReason === null ? null : h("span", { class: "exit", "data-testid": "exit" }, ` · last exit: ${n.lastExitReason}`),
    n.replacedBy === null ? null : h("span", { "data-testid": "replaced-by" }, " · replaced by ", runLink(n.replacedBy)),
    n.parentSeq === null || n.depth === 0 ? null : muted(` from seq ${n.parentSeq}`),
    n.modelCalls === 0 ? null : muted(` · ${n.modelCalls} model calls · ${n.totalTokens} tokens · ${usd(n.costUsd)}`),
  );
}
