import { positionals, stringOption } from "../args.js";
import { decide, deciderOf } from "../approval-decision.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";

export const deny: Command = {
  name: "deny",
  usage: "<runId> <toolCallId> [--by name] [--reason text]",
  summary: "deny a tool call that waits for a human; the model is told, with the reason",
  help: [
    "--by name       who denies, recorded with the decision (default: $USER, else cli)",
    "--reason text   why; the model reads it in the tool's result",
    "$CAIRN_APPROVAL_KEY   signs the decision (an application with an approvalKey acts only on signed ones)",
    "The tool never runs. List what waits with `cairn approvals`. A decision is final.",
  ],
  options: { by: "string", reason: "string" },
  async run({ args, database, json }) {
    const [runId, toolCallId] = positionals(args, ["runId", "toolCallId"], "deny");
    const reason = stringOption(args, "reason");
    if (reason === "") throw new CliError("--reason is empty", "say why, or leave --reason out");
    await decide(database, runId!, toolCallId!, { approved: false, by: deciderOf(args), reason: reason ?? null }, json);
  },
};
