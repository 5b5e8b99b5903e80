import type { ReadStore } from "./read-store.js";

/** One approval request as recorded, whatever its status (the pending ones: `cairn.approvals.list`). */
export interface ApprovalRecord {
  toolName: string;
  /** pending, approved, denied, or cancelled (withdrawn when its run was cancelled). */
  status: string;
  decidedBy: string | null;
  decidedAt: number | null;
}

/** The approval request of tool call `toolCallId` in run `runId`, or undefined when there is none. */
export async function findApproval(store: ReadStore, runId: string, toolCallId: string): Promise<ApprovalRecord | undefined> {
  const [row] = await store.select<{ tool_name: string; status: string; decided_by: string | null; decided_at: unknown }>(
    "SELECT tool_name, status, decided_by, decided_at FROM cairn_approvals WHERE run_id = $1 AND tool_call_id = $2",
    [runId, toolCallId],
  );
  if (row === undefined) return undefined;
  return { toolName: row.tool_name, status: row.status, decidedBy: row.decided_by, decidedAt: row.decided_at === null ? null : Number(row.decided_at) };
}
