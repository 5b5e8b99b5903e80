import { randomUUID } from "node:crypto";
import { InvalidSpecError } from "../errors.js";
import { ACTIONS_TABLE } from "./schema.js";
import type { UiHost } from "./host.js";

/** What a person did from the dashboard, as recorded in cairn_operator_actions. */
export type ActionName = "cancel" | "resume" | "fork" | "approve" | "deny";

export interface ActionRequest {
  action: ActionName;
  runId: string;
  /** Who did it: the name the page sent, else the dashboard's default actor. */
  actor: string;
  fromSeq?: number;
  toolCallId?: string;
  reason?: string;
}

/**
 * Carries out an action through the host (the same calls the CLI makes) and then records who did
 * it. Failure semantics: the action and its record are two commits. An action that fails records
 * nothing; a crash between the two leaves the action done and unrecorded — the approvals keep their
 * own `decided_by` either way, and the run's rows show what happened.
 */
export async function performAction(host: UiHost, request: ActionRequest): Promise<Record<string, unknown>> {
  const { action, runId, actor } = request;
  let result: Record<string, unknown>;
  switch (action) {
    case "cancel":
      result = { cancelled: await host.cancel(runId) };
      break;
    case "resume":
      result = { resumed: await host.resume(runId) };
      break;
    case "fork": {
      const fromSeq = request.fromSeq;
      if (fromSeq === undefined || !Number.isInteger(fromSeq) || fromSeq < 0) {
        throw new InvalidSpecError("fromSeq", fromSeq, "give the first seq to execute again, a whole number ≥ 0");
      }
      result = { forked: (await host.fork(runId, { fromSeq })).id, fromSeq };
      break;
    }
    case "approve":
    case "deny": {
      const toolCallId = request.toolCallId;
      if (toolCallId === undefined || toolCallId === "") throw new InvalidSpecError("toolCallId", toolCallId, "name the tool call to decide");
      if (action === "approve") await host.approve(runId, toolCallId, { by: actor });
      else await host.deny(runId, toolCallId, { by: actor, ...(request.reason ? { reason: request.reason } : {}) });
      result = { toolCallId, decision: action === "approve" ? "approved" : "denied", ...(request.reason ? { reason: request.reason } : {}) };
      break;
    }
    default:
      throw new InvalidSpecError("action", action, "use cancel, resume, fork, approve or deny");
  }
  const store = await host.store();
  await store.commit(null, [
    {
      type: "insert",
      table: ACTIONS_TABLE,
      values: { id: randomUUID(), run_id: runId, action, actor, detail: JSON.stringify(result), at: host.now() },
    },
  ]);
  return { action, runId, actor, ...result };
}
