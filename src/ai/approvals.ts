import { randomUUID } from "node:crypto";
import { CairnError, InvalidSpecError, RunNotFoundError } from "../errors.js";
import { decodeValue, toStored } from "../store/value/index.js";
import type { Store } from "../store/store.js";
import { approvalTopic, signDecision, type ApprovalDecision, type DecisionMessage } from "./approval-channel.js";

export interface PendingApproval {
  runId: string;
  toolCallId: string;
  /** "tool": a tool call behind an "approve" permission or `needsApproval`; "budget": a request to raise a spent budget. */
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
  decided_by: string | null;
  decided_at: number | string | null;
  reason: string | null;
}

/** What the approvals API needs from Cairn. */
export interface ApprovalsHost {
  ready(): Promise<Store>;
  now(): number;
  /** New work may be claimable here (the decision wakes a waiting run). */
  poke(): void;
  /** The application's approval key: decisions are signed with it (`new Cairn({ approvalKey })`). */
  approvalKey: Uint8Array | undefined;
}

/**
 * Human approvals of tool calls, from this process or any other sharing the database: the only way
 * to decide one (a message on an approval topic from anywhere else is refused, see
 * approval-channel.ts).
 *
 * Failure semantics: a decision commits the approval row (status, who decided, when, why) and the
 * message that wakes the run in one transaction; the run acts only on a message its row confirms.
 * Deciding twice — in sequence or racing — is refused for all but the first decision, as is
 * deciding for a cancelled run (its requests are withdrawn until it is resumed). With an approval
 * key, the decision is signed with it, and a run of an application holding the key acts only on
 * decisions signed with that key.
 */
export class Approvals {
  constructor(private readonly host: ApprovalsHost) {}

  /** Pending approvals, oldest first. */
  async list(filter: { runId?: string } = {}): Promise<PendingApproval[]> {
    if (filter.runId !== undefined && typeof filter.runId !== "string") throw new InvalidSpecError("runId", filter.runId, "must be a run id (a string)");
    const store = await this.host.ready();
    const columns = "run_id, request_seq, kind, tool_call_id, tool_name, input, status, requested_at";
    const rows =
      filter.runId === undefined
        ? await store.select<ApprovalRow>(`SELECT ${columns} FROM cairn_approvals WHERE status = 'pending' ORDER BY requested_at, run_id, request_seq`)
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
    checkOptions(options, ["by"]);
    await this.decide(runId, toolCallId, { approved: true, by: options.by ?? null, reason: null });
  }

  async deny(runId: string, toolCallId: string, options: { by?: string; reason?: string } = {}): Promise<void> {
    checkOptions(options, ["by", "reason"]);
    await this.decide(runId, toolCallId, { approved: false, by: options.by ?? null, reason: options.reason ?? null });
  }

  private async decide(runId: string, toolCallId: string, decision: ApprovalDecision): Promise<void> {
    if (typeof runId !== "string" || runId === "") throw new InvalidSpecError("runId", runId, "must be a non-empty run id");
    if (typeof toolCallId !== "string" || toolCallId === "")
      throw new InvalidSpecError("toolCallId", toolCallId, "must be a non-empty tool call id (see cairn.approvals.list)");
    const store = await this.host.ready();
    const run = await store.getRun(runId);
    if (run === undefined) throw new RunNotFoundError(runId);
    if (run.status === "cancelled") {
      throw new CairnError(
        `run ${runId} is cancelled: its approval requests are withdrawn — resume it (\`cairn resume ${runId}\`) to decide tool call ${toolCallId}`,
        { runId },
      );
    }
    const row = await this.request(store, runId, toolCallId);
    if (row === undefined) {
      throw new CairnError(`run ${runId} has no approval request for tool call ${toolCallId} — list them with \`cairn approvals\``, {
        runId,
      });
    }
    if (row.status !== "pending") throw alreadyDecided(runId, toolCallId, row);
    const requestSeq = Number(row.request_seq);
    const at = this.host.now();
    const message: DecisionMessage = { ...decision };
    if (this.host.approvalKey !== undefined) message.signature = signDecision(this.host.approvalKey, runId, requestSeq, row.tool_call_id, decision);
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
          // In Cairn's reserved id space: no user message can take it first.
          id: `approval:${runId}:${requestSeq}:${randomUUID()}`,
          runId,
          topic: approvalTopic(requestSeq),
          body: toStored(message, "an approval decision"),
          sender: decision.by,
          createdAt: at,
        },
      },
    ]);
    // The update applies only to a pending row: if another decision (or a cancel) got there first,
    // the row says so, and this decision — whose message the run will refuse — is reported refused.
    const [after] = await store.select<ApprovalRow>(`${SELECT_REQUEST} WHERE run_id = $1 AND request_seq = $2`, [runId, requestSeq]);
    const ours =
      after !== undefined &&
      after.status === (decision.approved ? "approved" : "denied") &&
      Number(after.decided_at) === at &&
      after.decided_by === decision.by &&
      after.reason === decision.reason;
    if (!ours) {
      if (after?.status === "cancelled")
        throw new CairnError(`run ${runId} was cancelled while tool call ${toolCallId} was being decided: the request is withdrawn`, { runId });
      throw alreadyDecided(runId, toolCallId, after ?? row);
    }
    this.host.poke();
  }

  /** The newest request under this id: a provider's tool call ids are unique in a conversation, not across every conversation a run holds. */
  private async request(store: Store, runId: string, toolCallId: string): Promise<ApprovalRow | undefined> {
    const [row] = await store.select<ApprovalRow>(
      `${SELECT_REQUEST} WHERE run_id = $1 AND tool_call_id = $2 ORDER BY (CASE WHEN status = 'pending' THEN 0 ELSE 1 END), request_seq DESC`,
      [runId, toolCallId],
    );
    return row;
  }
}

const SELECT_REQUEST =
  "SELECT run_id, request_seq, kind, tool_call_id, tool_name, input, status, requested_at, decided_by, decided_at, reason FROM cairn_approvals";

function alreadyDecided(runId: string, toolCallId: string, row: ApprovalRow): CairnError {
  if (row.status === "cancelled") {
    return new CairnError(`the approval request for tool call ${toolCallId} in run ${runId} was withdrawn when the run was cancelled`, { runId });
  }
  const by = row.decided_by === null ? "" : ` by ${row.decided_by}`;
  return new CairnError(`the approval of tool call ${toolCallId} in run ${runId} was already decided (${row.status}${by}); a decision is final`, {
    runId,
  });
}

/** `by` and `reason`, when given, are non-empty strings; nothing else is accepted. */
function checkOptions(options: unknown, allowed: readonly string[]): void {
  if (options === null || typeof options !== "object") throw new InvalidSpecError("options", options, `must be an object with ${allowed.join(" / ")}`);
  for (const [field, value] of Object.entries(options)) {
    if (!allowed.includes(field)) throw new InvalidSpecError(field, value, `not an option of this decision (${allowed.join(", ")})`);
    if (value !== undefined && (typeof value !== "string" || value === "")) throw new InvalidSpecError(field, value, "must be a non-empty string");
  }
}
