import type { AgentTreeRun } from "../observe/agent-tree.js";
import { formatUsd } from "./agent-fields.js";
import { table } from "./output.js";
import { bold, dim, status } from "./style.js";

/** Rows past this many are summed in the total but not listed: the section stays short. */
const MAX_ROWS = 30;

/** The agents section of `cairn show`: the tree as a table, and a total when there is more than one run. */
export function renderAgentTree(tree: readonly AgentTreeRun[]): string {
  const shown = tree.slice(0, MAX_ROWS);
  const rows = shown.map((run, i) => [
    treePrefix(tree, i) + run.id,
    run.workflow,
    status(run.status),
    String(run.modelCalls),
    String(run.totalTokens),
    formatUsd(run.costUsd),
  ]);
  if (tree.length > 1) {
    const sum = (pick: (run: AgentTreeRun) => number) => tree.reduce((total, run) => total + pick(run), 0);
    rows.push([
      dim(`total (${tree.length} runs)`),
      "",
      "",
      String(sum((r) => r.modelCalls)),
      String(sum((r) => r.totalTokens)),
      formatUsd(sum((r) => r.costUsd)),
    ]);
  }
  const lines = [
    bold("agents"),
    table(
      ["RUN", "WORKFLOW", "STATUS", { header: "MODEL CALLS", align: "right" }, { header: "TOKENS", align: "right" }, { header: "COST", align: "right" }],
      rows,
    ),
  ];
  if (tree.length > MAX_ROWS) lines.push(dim(`(${tree.length - MAX_ROWS} more runs not listed; the total counts them)`));
  return lines.join("\n");
}

/** `├─ ` / `└─ ` with `│  ` for the open levels above: the tree drawn in the RUN column. */
export function treePrefix(tree: readonly { depth: number }[], index: number): string {
  const run = tree[index]!;
  if (run.depth === 0) return "";
  let prefix = "";
  for (let level = 1; level <= run.depth; level++) {
    const last = isLastAt(tree, index, level);
    prefix += level === run.depth ? (last ? "└─ " : "├─ ") : last ? "   " : "│  ";
  }
  return prefix;
}

/** Whether the ancestor of tree[index] at `level` (or the run itself) has no later sibling. */
function isLastAt(tree: readonly { depth: number }[], index: number, level: number): boolean {
  for (let j = index + 1; j < tree.length; j++) {
    const depth = tree[j]!.depth;
    if (depth < level) return true;
    if (depth === level) return false;
  }
  return true;
}
