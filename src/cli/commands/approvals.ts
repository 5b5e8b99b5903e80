import { stringOption, positionals } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { withClient } from "../database.js";
import { formatDuration, formatTime, print, printJson, renderValue, table } from "../output.js";
import { dim } from "../style.js";

export const approvals: Command = {
  name: "approvals",
  usage: "[--run runId]",
  summary: "tool calls waiting for a human to approve or deny them",
  help: ["--run runId   only this run's", 'An agent tool with permission "approve" waits here; decide with `cairn approve` or `cairn deny`.'],
  options: { run: "string" },
  async run({ args, database, json }) {
    positionals(args, [], "approvals");
    const runId = stringOption(args, "run");
    if (runId === "") throw new CliError("--run is empty", "give a run id, or leave --run out for every run");
    const pending = await withClient(database, async (cairn) => {
      if (runId !== undefined) await cairn.run(runId).status();
      return cairn.approvals.list(runId === undefined ? {} : { runId });
    });
    const now = Date.now();
    if (json) {
      return printJson(pending.map((p) => ({ ...p, requestedAt: p.requestedAt.toISOString(), waitingMs: now - p.requestedAt.getTime() })));
    }
    if (pending.length === 0) return print(dim(`no pending approvals${runId === undefined ? "" : ` for run ${runId}`}`));
    print(
      table(
        ["RUN", "TOOL CALL", "TOOL", "INPUT", "REQUESTED", { header: "WAITING", align: "right" }],
        pending.map((p) => [
          p.runId,
          p.toolCallId,
          p.toolName,
          renderValue(p.input, 50),
          formatTime(p.requestedAt.getTime()),
          formatDuration(now - p.requestedAt.getTime()),
        ]),
      ),
    );
    print(dim("decide with `cairn approve <runId> <toolCallId>` or `cairn deny <runId> <toolCallId> --reason <text>`"));
  },
};
