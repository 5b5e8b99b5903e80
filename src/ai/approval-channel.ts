import { createHmac, timingSafeEqual } from "node:crypto";
import { InvalidSpecError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import type { WriteOp } from "../store/store.js";
import { agentState } from "./agent-state.js";

/**
 * How an approval decision reaches the run that waits for it, and why nobody but the approval API
 * can make one.
 *
 * The decision of record is the `cairn_approvals` row: the approval API (`cairn.approvals`,
 * `cairn approve` / `cairn deny`) moves it from `pending` to `approved` or `denied` — with who
 * decided and why — and, in the same transaction, posts a message on the request's reserved topic
 * (`approval:<seq>`) to wake the run. User sends (`cairn.send`, `ctx.send`, `cairn send`) are
 * refused on reserved topics. Even so, the message only wakes the run: the run then checks it, in a
 * recorded step, against the row — a message the row does not confirm (forged, malformed, stale, or
 * unsigned when the application holds an approval key) is refused, recorded as refused, and the run
 * waits on. So the tool runs only on a decision the approval API recorded, and `decided_by` in the
 * audit trail is the name the API recorded.
 *
 * Failure semantics: the wake-up is consumed exactly once (a receive), the check is a step; a crash
 * between them re-runs the check, which reads the same row. Replay returns both records, so the run
 * takes the same branch. A fork cut between the two finds no row of its own and accepts the recorded
 * message if it is well formed (and correctly signed, with a key).
 */

/** The decision an approver made, as the run sees it. */
export interface ApprovalDecision {
  approved: boolean;
  by: string | null;
  reason: string | null;
}

/** What travels on the reserved topic: the decision and, when the deciding Cairn holds a key, its HMAC. */
export interface DecisionMessage extends ApprovalDecision {
  signature?: string;
}

/** The reserved topic a decision reaches the run on: per request (the seq of the step that asked). */
export function approvalTopic(requestSeq: number): string {
  return `approval:${requestSeq}`;
}

/** The checked decision, or why a message was refused: what the check step records. */
type Verdict = ({ ok: true } & ApprovalDecision) | { ok: false; refused: string };

/** The name of the step that checks a decision message against its row. */
const CHECK_STEP = "check-approval";

/** An approval key as bytes, checked: at least 16 bytes (a shared secret, not a password). */
export function approvalKeyBytes(key: string | Uint8Array | undefined, field = "approvalKey"): Uint8Array | undefined {
  if (key === undefined) return undefined;
  const bytes = typeof key === "string" ? Buffer.from(key, "utf8") : key instanceof Uint8Array ? key : undefined;
  if (bytes === undefined || bytes.length < 16) {
    throw new InvalidSpecError(
      field,
      typeof key === "string" ? `${key.length} characters` : key,
      "an approval key must be a string or bytes of at least 16 bytes",
    );
  }
  return bytes;
}

/**
 * The HMAC-SHA256 of one decision on one request. It names the run, the request and the tool call,
 * so a signature cannot be replayed onto another request.
 */
export function signDecision(key: Uint8Array, runId: string, requestSeq: number, toolCallId: string, decision: ApprovalDecision): string {
  const text = JSON.stringify(["cairn-approval-v1", runId, requestSeq, toolCallId, decision.approved, decision.by, decision.reason]);
  return createHmac("sha256", key).update(text).digest("hex");
}

/** A decision's shape, checked: `approved` boolean, `by` and `reason` strings or null. */
export function decisionProblem(value: unknown): string | null {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return "a decision must be an object";
  const d = value as Record<string, unknown>;
  if (typeof d.approved !== "boolean") return `"approved" must be true or false, not ${JSON.stringify(d.approved) ?? "undefined"}`;
  for (const field of ["by", "reason"] as const) {
    if (d[field] !== null && typeof d[field] !== "string") return `"${field}" must be a string or null`;
  }
  if (d.signature !== undefined && typeof d.signature !== "string") return `"signature" must be a string`;
  return null;
}

interface DecidedRow {
  status: string;
  tool_call_id: string;
  decided_by: string | null;
  reason: string | null;
}

/**
 * Waits — holding no memory — for the approval API's decision on the request recorded at
 * `requestSeq`, and returns it. Messages the row does not confirm are refused and the wait goes on.
 */
export async function awaitDecision(run: DurableRun, requestSeq: number, toolCallId: string): Promise<ApprovalDecision> {
  for (;;) {
    const message = await run.recv<unknown>(approvalTopic(requestSeq));
    let reopen = false;
    const verdict = await run.operation<Verdict>({
      kind: "step",
      name: CHECK_STEP,
      fingerprint: `request-${requestSeq}`, // which request it checks: concurrent approvals keep their own
      execute: async () => {
        const [row] = await run.store.select<DecidedRow>(
          "SELECT status, tool_call_id, decided_by, reason FROM cairn_approvals WHERE run_id = $1 AND request_seq = $2",
          [run.runId, requestSeq],
        );
        const verdict = check(run, requestSeq, row?.tool_call_id ?? toolCallId, message, row);
        // A decided row whose message fails its signature was written around the approval API:
        // put the request back to pending so that a real approver can still decide it.
        reopen = !verdict.ok && row !== undefined && row.status !== "pending" && row.status !== "cancelled";
        return verdict;
      },
      alsoWrite: (outcome): WriteOp[] =>
        outcome.ok && reopen
          ? [
              {
                type: "update",
                table: "cairn_approvals",
                where: { run_id: run.runId, request_seq: requestSeq },
                set: { status: "pending", decided_by: null, decided_at: null, reason: null },
              },
            ]
          : [],
    });
    if (verdict.ok) return { approved: verdict.approved, by: verdict.by, reason: verdict.reason };
  }
}

function check(run: DurableRun, requestSeq: number, toolCallId: string, message: unknown, row: DecidedRow | undefined): Verdict {
  const problem = decisionProblem(message);
  if (problem !== null) return { ok: false, refused: `malformed decision: ${problem}` };
  const decision = message as DecisionMessage;
  const key = agentState(run).approvalKey;
  if (key !== undefined) {
    if (decision.signature === undefined) return { ok: false, refused: "unsigned decision: this application requires signed approvals (approvalKey)" };
    const expected = Buffer.from(signDecision(key, run.runId, requestSeq, toolCallId, decision), "hex");
    const given = Buffer.from(decision.signature, "hex");
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      return { ok: false, refused: "bad signature: the decision was not signed with this application's approval key" };
  }
  if (row === undefined) return { ok: true, approved: decision.approved, by: decision.by, reason: decision.reason };
  if (row.status !== "approved" && row.status !== "denied") {
    return { ok: false, refused: `the approval API recorded no decision (the request is ${row.status})` };
  }
  const recorded: ApprovalDecision = { approved: row.status === "approved", by: row.decided_by ?? null, reason: row.reason ?? null };
  if (recorded.approved !== decision.approved || recorded.by !== decision.by || recorded.reason !== decision.reason) {
    return { ok: false, refused: "the message differs from the decision the approval API recorded" };
  }
  return { ok: true, ...recorded };
}
