import { positionals } from "../args.js";
import { decide, deciderOf } from "../approval-decision.js";
import type { Command } from "../command.js";

export const approve: Command = {
  name: "approve",
  usage: "<runId> <toolCallId> [--by name]",
  summary: "approve a tool call that waits for a human; the run goes on and runs the tool",
  help: [
    "--by name   who approves, recorded with the decision (default: $USER, else cli)",
    "$CAIRN_APPROVAL_KEY   signs the decision (an application with an approvalKey acts only on signed ones)",
    "List what waits with `cairn approvals`. A decision is final.",
  ],
  options: { by: "string" },
  async run({ args, database, json }) {
    const [runId, toolCallId] = positionals(args, ["runId", "toolCallId"], "approve");
    await decide(database, runId!, toolCallId!, { approved: true, by: deciderOf(args), reason: null }, json);
  },
};
