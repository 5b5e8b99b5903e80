import { CairnError } from "../errors.js";
import { decodeValue } from "../store/codec.js";
import type { Store } from "../store/store.js";
import { toStored } from "../engine/values.js";
import { approvalTopic, type ApprovalDecision } from "./durable-tools.js";

export interface PendingApproval {
  runId: string;
  toolCallId: string;
  /** "tool": a tool call behind an "approve" permission; "budget": a request to raise a spent budget. */
  kind: "tool" | "budget";
  toolName: string;
  input: unknown;
  requestedAt: Date;
}

interface ApprovalRow {
  run_id: string;
  request_seq: number;
  kind: "tool" | "budget";
  tool_call_id: string;
  tool_name: string;
  input: string | null;
  status: string;
  requested_at: number;
}

/** What the approvals API needs from Cairn. */
export interface ApprovalsHost {
  ready(): Promise<Store>;
  now(): number;
  /** New work may be claimable here (the decision wakes a waiting run). */
  poke(): void;
}

/**
 * Human approvals of tool calls, from this process or any other sharing the database.
 *
 * Failure semantics: a decision commits the approval row and a message to the waiting run in one
 * transaction; the run consumes the message exactly once. Deciding twice is refused.
 */
export class Approvals {
  constructor(private readonly host: ApprovalsHost) {}

  /** Pending approvals, oldest first. */
  async list(filter: { runId?: string } = {}): Promise<PendingApproval[]> {
    const store = await this.host.ready();
    const columns = "run_id, request_seq, kind, tool_call_id, tool_name, input, status, requested_at";
    const rows =
      filter.runId === undefined
        ? await store.select<ApprovalRow>(
            `SELECT ${columns} FROM cairn_approvals WHERE status = 'pending' ORDER BY requested_at, run_id, request_seq`,
          )
        : await store.select<ApprovalRow>(
            `SELECT ${columns} FROM cairn_approvals WHERE status = 'pending' AND run_id = $1 ORDER BY requested_at, request_seq`,
            [filter.runId],
          );
    return rows.map((r) => ({
      runId: r.run_id,
      toolCallId: r.tool_call_id,
      kind: r.kind,
      toolName: r.tool_name,
      input: r.input === null ? undefined : decodeValue(r.input),
      requestedAt: new Date(Number(r.requested_at)),
    }));
  }

  async approve(runId: string, toolCallId: string, options: { by?: string } = {}): Promise<void> {
    await this.decide(runId, toolCallId, { approved: true, by: options.by ?? null, reason: null });
  }

  async deny(runId: string, toolCallId: string, options: { by?: string; reason?: string } = {}): Promise<void> {
    await this.decide(runId, toolCallId, { approved: false, by: options.by ?? null, reason: options.reason ?? null });
  }

  private async decide(runId: string, toolCallId: string, decision: ApprovalDecision): Promise<void> {
    const store = await this.host.ready();
    // The newest request under this id: a provider's tool call ids are unique in a conversation,
    // not necessarily across every conversation a run holds.
    const [row] = await store.select<ApprovalRow>(
      `SELECT run_id, request_seq, kind, tool_call_id, tool_name, input, status, requested_at FROM cairn_approvals
       WHERE run_id = $1 AND tool_call_id = $2 ORDER BY (CASE WHEN status = 'pending' THEN 0 ELSE 1 END), request_seq DESC`,
      [runId, toolCallId],
    );
    if (row === undefined) {
      throw new CairnError(`run ${runId} has no approval request for tool call ${toolCallId} — list them with \`cairn approvals\``, {
        runId,
      });
    }
    if (row.status !== "pending") {
      throw new CairnError(`the approval of tool call ${toolCallId} in run ${runId} was already decided (${row.status})`, { runId });
    }
    const requestSeq = Number(row.request_seq);
    const at = this.host.now();
    await store.commit(null, [
      {
        type: "update",
        table: "cairn_approvals",
        where: { run_id: runId, request_seq: requestSeq, status: "pending" },
        set: { status: decision.approved ? "approved" : "denied", decided_at: at, decided_by: decision.by, reason: decision.reason },
      },
      {
        type: "message",
        message: {
          // One decision per request: a second one (a retry, a race) inserts nothing.
          id: `approval:${runId}:${requestSeq}`,
          runId,
          topic: approvalTopic(requestSeq),
          body: toStored(decision, "an approval decision"),
          sender: decision.by,
          createdAt: at,
        },
      },
    ]);
    this.host.poke();
  }
}
