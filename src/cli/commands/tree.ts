import { positionals } from "../args.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { treePrefix } from "../agent-tree.js";
import { formatUsd } from "../agent-fields.js";
import { print, printJson, renderCell, table } from "../output.js";
import { dim, status } from "../style.js";
import { RunNotFoundError } from "../../errors.js";
import { loadRunTree, type RunTreeNode } from "../../observe/agent-tree.js";

export const tree: Command = {
  name: "tree",
  usage: "<runId>",
  summary: "the supervision and delegation tree under a run: each child's state, restarts, last exit reason",
  help: [
    "Every run under <runId> (children, their children, ...), in the order they were started.",
    "For a supervised child: its child spec id, how many restarts of that spec came before it,",
    "the last exit reason its supervisor saw (OTP's normal, shutdown, killed, or the error),",
    "and the run that replaced it. Agents also show their model calls and cost.",
    "The same rows in SQL: SELECT * FROM cairn_tree WHERE root_id = '<root>'",
  ],
  options: {},
  async run({ args, database, json }) {
    const [runId] = positionals(args, ["runId"], "tree");
    const nodes = await withReadStore(database, async (store) => {
      const run = await store.getRun(runId!);
      if (run === undefined) throw new RunNotFoundError(runId!);
      return loadRunTree(store, run);
    });
    if (json) return printJson(nodes);
    print(renderRunTree(nodes));
  },
};

export function renderRunTree(nodes: readonly RunTreeNode[]): string {
  const agents = nodes.some((n) => n.modelCalls > 0);
  const rows = nodes.map((node, i) => [
    treePrefix(nodes, i) + node.id,
    node.workflow,
    status(node.state),
    node.childId ?? dim("-"),
    node.childId === null ? dim("-") : String(node.restartCount),
    node.lastExitReason === null ? dim("-") : renderCell(node.lastExitReason, 60),
    node.replacedBy === null ? "" : dim(`→ ${node.replacedBy}`),
    ...(agents ? [String(node.modelCalls), formatUsd(node.costUsd)] : []),
  ]);
  return table(
    [
      "RUN",
      "WORKFLOW",
      "STATE",
      "CHILD",
      { header: "RESTARTS", align: "right" },
      "LAST EXIT",
      "REPLACED BY",
      ...(agents
        ? [
            { header: "MODEL CALLS", align: "right" as const },
            { header: "COST", align: "right" as const },
          ]
        : []),
    ],
    rows,
  );
}
