import { RunNotFoundError } from "../errors.js";
import { stringOption, type ParsedArgs } from "./args.js";
import { CliError } from "./cli-error.js";
import { withClient } from "./database.js";
import { runtimeOf } from "../internal.js";
import { formatTime, print, printJson } from "./output.js";
import { findApproval } from "../observe/approvals.js";
import { findRun, isFinished } from "../observe/runs.js";
import { dim } from "./style.js";

/** What `cairn approve` and `cairn deny` decide. */
export interface Decision {
  approved: boolean;
  by: string;
  reason: string | null;
}

/** `--by`, else $USER, else "cli": who decided, as recorded with the decision. */
export function deciderOf(args: ParsedArgs): string {
  const by = stringOption(args, "by");
  if (by === "") throw new CliError("--by is empty", "name who decides, or leave --by out for $USER");
  return by ?? (process.env.USER === undefined || process.env.USER === "" ? "cli" : process.env.USER);
}

/**
 * Decides a pending approval through `cairn.approvals` (a client: the executor running the run picks
 * the decision up) — the only way to decide one: `cairn send` to an approval topic is refused. With
 * $CAIRN_APPROVAL_KEY set, the decision is signed with that key. The request is looked up first so
 * that an unknown run, an unknown tool call, a cancelled run and a decision already taken each fail
 * with a line that says which; a decision racing another one is still refused by `cairn.approvals`.
 */
export async function decide(database: string, runId: string, toolCallId: string, decision: Decision, json: boolean): Promise<void> {
  const { toolName, run } = await withClient(database, async (cairn) => {
    const store = await runtimeOf(cairn).readyStore();
    const run = await findRun(store, runId);
    if (run === undefined) throw new RunNotFoundError(runId);
    if (run.status === "cancelled") {
      throw new CliError(`run ${runId} is cancelled: its approval requests are withdrawn`, `resume it first (\`cairn resume ${runId}\`), then decide`);
    }
    const row = await findApproval(store, runId, toolCallId);
    if (row === undefined) {
      throw new CliError(
        `run ${runId} has no approval request for tool call ${toolCallId}`,
        `list the pending ones with \`cairn approvals --run ${runId}\``,
      );
    }
    if (row.status === "cancelled") {
      throw new CliError(
        `tool call ${toolCallId} (${row.toolName}) in run ${runId} was withdrawn when the run was cancelled`,
        `resume the run first (\`cairn resume ${runId}\`), then decide`,
      );
    }
    if (row.status !== "pending") {
      const by = row.decidedBy === null ? "" : ` by ${row.decidedBy}`;
      const at = row.decidedAt === null ? "" : ` at ${formatTime(row.decidedAt)}`;
      throw new CliError(
        `tool call ${toolCallId} (${row.toolName}) in run ${runId} was already ${row.status}${by}${at}`,
        `a decision is final; see what followed with \`cairn show ${runId}\``,
      );
    }
    if (decision.approved) await cairn.approvals.approve(runId, toolCallId, { by: decision.by });
    else await cairn.approvals.deny(runId, toolCallId, { by: decision.by, ...(decision.reason === null ? {} : { reason: decision.reason }) });
    return { toolName: row.toolName, run };
  });
  const verb = decision.approved ? "approved" : "denied";
  if (json) return printJson({ runId, toolCallId, toolName, decision: verb, by: decision.by, reason: decision.reason });
  print(`${verb} tool call ${toolCallId} (${toolName}) in run ${runId}, as ${decision.by}${decision.reason === null ? "" : `: ${decision.reason}`}`);
  // Not an error: the decision is recorded and the run acts on it once it runs again.
  if (isFinished(run)) print(dim(`note: run ${runId} is ${run.status}; it acts on the decision only if resumed (\`cairn resume ${runId}\`)`));
}
