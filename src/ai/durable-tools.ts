import type { ToolExecutionOptions, ToolSet } from "ai";
import { InvalidSpecError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import type { WorkflowContext } from "../engine/context.js";
import { encodeValue } from "../store/codec.js";
import type { WriteOp } from "../store/store.js";
import { fingerprintOf } from "../engine/fingerprint.js";
import { agentState } from "./agent-state.js";
import { IDEMPOTENCY_KEY } from "./idempotency.js";

export type PermissionDecision = "allow" | "deny" | "approve";

/**
 * Who may run a tool: "allow" runs it; "deny" never runs it and tells the model so; "approve"
 * records an approval request and the run waits — holding no memory — until someone approves or
 * denies it (`cairn.approvals`, or `cairn approve` / `cairn deny` from any process). A function
 * decides per input; its decision is recorded, so replay takes the same branch.
 */
export type Permission = PermissionDecision | ((input: unknown, ctx: WorkflowContext) => PermissionDecision | Promise<PermissionDecision>);

export type Permissions = Record<string, Permission>;

/** The decision an approver sends to the waiting run. */
export interface ApprovalDecision {
  approved: boolean;
  by: string | null;
  reason: string | null;
}

/** The topic a decision reaches the run on: per request (the seq of the step that asked). */
export function approvalTopic(requestSeq: number): string {
  return `approval:${requestSeq}`;
}

export function validatePermissions(permissions: Permissions | undefined, tools: ToolSet): void {
  for (const [name, permission] of Object.entries(permissions ?? {})) {
    if (!(name in tools)) throw new InvalidSpecError(`permissions.${name}`, permission, "names no tool of this agent");
    if (typeof permission !== "function" && !["allow", "deny", "approve"].includes(permission)) {
      throw new InvalidSpecError(`permissions.${name}`, permission, 'must be "allow", "deny", "approve" or a function');
    }
  }
}

/**
 * The tools, each execution made a durable step (kind "tool") recorded in `cairn_tool_calls` with a
 * link to the model call that asked for it.
 *
 * Failure semantics: a tool's result is committed before the model sees it; replay returns it
 * without running the tool. A crash after the tool's external effect but before its checkpoint
 * runs it again once on recovery, with the same idempotency key (`idempotencyKey(options)`), so
 * the external service can deduplicate. Approval requests and decisions survive crashes on
 * either side: the request is a row, the decision a message consumed exactly once.
 */
export function durableTools<T extends ToolSet>(run: DurableRun, ctx: WorkflowContext, tools: T, permissions: Permissions = {}): T {
  validatePermissions(permissions, tools);
  const wrapped: ToolSet = {};
  for (const [name, tool] of Object.entries(tools)) {
    const execute = tool.execute;
    if (execute === undefined) {
      wrapped[name] = tool;
      continue;
    }
    wrapped[name] = {
      ...tool,
      execute: (input: unknown, options: ToolExecutionOptions) =>
        runTool(run, ctx, name, input, options, permissions[name] ?? "allow", (i, o) => execute(i as never, o)),
    } as ToolSet[string];
  }
  return wrapped as T;
}

type Execute = (input: unknown, options: ToolExecutionOptions) => unknown;

async function runTool(
  run: DurableRun,
  ctx: WorkflowContext,
  name: string,
  input: unknown,
  options: ToolExecutionOptions,
  permission: Permission,
  execute: Execute,
): Promise<unknown> {
  const toolCallId = options.toolCallId;
  const decision =
    typeof permission === "function"
      ? await ctx.step(`permission:${name}`, () => permission(input, ctx))
      : permission;
  if (decision === "deny") {
    return recordTool(run, name, input, options, "denied", "deny", null, async () => ({
      denied: true,
      message: `Permission denied: the tool "${name}" may not be used here. Do not retry it; tell the user instead.`,
    }));
  }
  let decidedBy: string | null = null;
  if (decision === "approve") {
    const requestSeq = await requestApproval(run, {
      stepName: `request-approval:${name}`,
      toolName: name,
      toolCallId: () => toolCallId,
      input,
      kind: "tool",
    });
    const answer = (await ctx.recv<ApprovalDecision>(approvalTopic(requestSeq))) as ApprovalDecision;
    decidedBy = answer.by;
    if (!answer.approved) {
      return recordTool(run, name, input, options, "denied", "approve", decidedBy, async () => ({
        denied: true,
        message: `The request to use "${name}" was denied${answer.by === null ? "" : ` by ${answer.by}`}${
          answer.reason === null ? "" : `: ${answer.reason}`
        }. Do not retry it; tell the user.`,
      }));
    }
  }
  return recordTool(run, name, input, options, "succeeded", decision, decidedBy, (key, signal) =>
    Promise.resolve(execute(input, { ...options, abortSignal: signal, [IDEMPOTENCY_KEY]: key } as ToolExecutionOptions)),
  );
}

function recordTool(
  run: DurableRun,
  name: string,
  input: unknown,
  options: ToolExecutionOptions,
  status: "succeeded" | "denied",
  permission: string,
  decidedBy: string | null,
  execute: (key: string, signal: AbortSignal) => Promise<unknown>,
): Promise<unknown> {
  const state = agentState(run);
  return run.operation({
    kind: "tool",
    name,
    fingerprint: fingerprintOf(input),
    execute: ({ idempotencyKey, signal }) => execute(idempotencyKey, signal),
    alsoWrite: (outcome, seq): WriteOp[] => [
      {
        type: "insert",
        table: "cairn_tool_calls",
        values: {
          run_id: run.runId,
          seq,
          tool_call_id: options.toolCallId,
          tool_name: name,
          model_seq: state.toolCallModelSeq.get(options.toolCallId) ?? null,
          input: jsonPreview(input, 4000),
          output_excerpt: outcome.ok ? jsonPreview(outcome.value, 200) : `error: ${String((outcome.error as Error)?.message ?? outcome.error)}`,
          status: outcome.ok ? status : "failed",
          permission,
          decided_by: decidedBy,
          child_run_id: null,
          created_at: run.clock.now(),
        },
        onConflict: { keys: ["run_id", "seq"], action: "ignore" },
      },
    ],
  });
}

/**
 * Records an approval request (a step, and a pending `cairn_approvals` row in its transaction) and
 * returns its seq. A run that replays the request without its decision in the journal (a fork, a
 * resumed run) makes sure the row is there and pending, so someone can still decide.
 */
export async function requestApproval(
  run: DurableRun,
  request: {
    stepName: string;
    /** Tells apart requests of the same name (a budget check's place among the model calls). */
    fingerprint?: string;
    toolName: string;
    toolCallId: (seq: number) => string;
    input: unknown;
    kind: "tool" | "budget";
  },
): Promise<number> {
  const { toolName: name, input, kind } = request;
  const row = (seq: number): WriteOp => ({
    type: "insert",
    table: "cairn_approvals",
    values: {
      run_id: run.runId,
      request_seq: seq,
      tool_call_id: request.toolCallId(seq),
      kind,
      tool_name: name,
      input: encodeValue(input, `input of ${name}`),
      status: "pending",
      requested_at: run.clock.now(),
    },
    onConflict: { keys: ["run_id", "request_seq"], action: "ignore" },
  });
  let live = false;
  const seq = await run.operation({
    kind: "step",
    name: request.stepName,
    ...(request.fingerprint === undefined ? {} : { fingerprint: request.fingerprint }),
    execute: ({ seq }) => ((live = true), seq),
    alsoWrite: (_outcome, seq) => [row(seq)],
  });
  const decided = run.peek("recv", approvalTopic(seq));
  if (!live && (decided === undefined || decided.status === "pending")) await run.store.commit(null, [row(seq)]);
  return seq;
}

function jsonPreview(value: unknown, max: number): string {
  let text: string;
  try {
    text = typeof value === "string" ? value : (JSON.stringify(value) ?? "undefined");
  } catch {
    text = String(value);
  }
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}
