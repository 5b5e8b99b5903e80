import type { JSONValue, LanguageModelV3ToolResultOutput as ToolResultOutput } from "@ai-sdk/provider";
import type { ToolSet } from "ai";
import { needsApprovalOptions, type ToolExecuteOptions as ToolExecutionOptions } from "./sdk-version.js";
import { InvalidSpecError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import type { StepCall, StepOptions, WorkflowContext } from "../engine/context.js";
import { encodeValue } from "../store/value/index.js";
import type { WriteOp } from "../store/store.js";
import { fingerprintOf } from "../engine/fingerprint.js";
import { agentState } from "./agent-state.js";
import { approvalTopic, awaitDecision } from "./approval-channel.js";
import { IDEMPOTENCY_KEY } from "./idempotency.js";
import { TOOL_CONTEXT } from "./tool-context.js";
import { isolated, isolatedToolTarget } from "../engine/isolation/index.js";
import { toolSpan } from "./gen-ai-spans.js";

export type PermissionDecision = "allow" | "deny" | "approve";

/**
 * Who may run a tool: "allow" runs it; "deny" never runs it and tells the model so; "approve"
 * records an approval request and the run waits — holding no memory — until someone approves or
 * denies it (`cairn.approvals`, or `cairn approve` / `cairn deny` from any process). A function
 * decides per input; its decision is recorded, so replay takes the same branch.
 */
export type Permission = PermissionDecision | ((input: unknown, ctx: WorkflowContext) => PermissionDecision | Promise<PermissionDecision>);

export type Permissions = Record<string, Permission>;

export type { ApprovalDecision } from "./approval-channel.js";

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
 * Approvals: a tool behind the "approve" permission, or with the AI SDK 6 option `needsApproval`
 * (true, or a function of the input that returns true), waits for a person: the same
 * `cairn_approvals` row, `cairn approvals` entry and `cairn.approvals` decision either way. Cairn
 * takes `needsApproval` over from the SDK (which would otherwise end the loop and leave the approval
 * to the caller), so the loop goes on once someone decides. A denial reaches the model as the SDK's
 * own `execution-denied` tool output, with the denier's reason; so does a "deny" permission.
 *
 * Failure semantics: a tool's result is committed before the model sees it; replay returns it
 * without running the tool. A crash after the tool's external effect but before its checkpoint
 * runs it again once on recovery, with the same idempotency key (`idempotencyKey(options)`), so
 * the external service can deduplicate. Approval requests and decisions survive crashes on
 * either side: the request is a row, the decision the row's, delivered as a message consumed
 * exactly once. A `needsApproval` or permission function runs once; its answer is recorded.
 *
 * Isolated tools: a tool whose `execute` is `isolated(module, exportName).tool({ isolation:
 * "process", timeoutMs, maxMemoryMb, retries })` runs that export with the tool's input in a pool
 * process, with those options as its step's (docs/isolation.md). A crash of that process fails
 * the tool call alone (IsolatedStepCrashedError), which the model is told like any tool error.
 * The export gets `{ idempotencyKey, attempt }`, not the SDK's options: the run's context
 * (`toolContext`) and the caller's abort signal stay in this process (an abort kills the process).
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
    const { needsApproval, toModelOutput, ...rest } = tool;
    // `execute: isolated(module, name).tool({ isolation: "process", ... })`: the tool's step runs its export (docs/isolation.md).
    const target = isolatedToolTarget(execute);
    const runIsolated =
      target === undefined ? undefined : (input: unknown) => ({ fn: isolated(target.module, target.exportName).with(input), options: target.options });
    wrapped[name] = {
      ...rest,
      execute: (input: unknown, options: ToolExecutionOptions) =>
        runTool(run, ctx, name, input, options, permissions[name] ?? "allow", needsApproval, (i, o) => execute(i as never, o), runIsolated?.(input)),
      toModelOutput: async (args: { toolCallId: string; input: unknown; output: unknown }) => {
        if (isDenial(args.output)) return deniedOutput(args.output);
        if (toModelOutput !== undefined) return toModelOutput(args as never);
        return typeof args.output === "string" ? { type: "text", value: args.output } : { type: "json", value: (args.output ?? null) as JSONValue };
      },
    } as ToolSet[string];
  }
  return wrapped as T;
}

type Execute = (input: unknown, options: ToolExecutionOptions) => unknown;
type NeedsApproval = ToolSet[string]["needsApproval"];

/** What a tool that did not run returns: the journal and `toolResults` keep it; the model sees `execution-denied`. */
interface Denial {
  denied: true;
  reason: string | null;
}

/** Denials made by this process (live or replayed): only these become `execution-denied`, never a tool's own value. */
const denials = new WeakSet<object>();

function isDenial(output: unknown): output is Denial {
  return typeof output === "object" && output !== null && denials.has(output);
}

function deniedOutput(denial: Denial): ToolResultOutput {
  return denial.reason === null ? { type: "execution-denied" } : { type: "execution-denied", reason: denial.reason };
}

async function runTool(
  run: DurableRun,
  ctx: WorkflowContext,
  name: string,
  input: unknown,
  options: ToolExecutionOptions,
  permission: Permission,
  needsApproval: NeedsApproval,
  execute: Execute,
  isolatedStep?: IsolatedToolStep,
): Promise<unknown> {
  const toolCallId = options.toolCallId;
  let decision = typeof permission === "function" ? await ctx.step(`permission:${name}`, () => permission(input, ctx)) : permission;
  if (decision === "deny") {
    const reason = `Permission denied: the tool "${name}" may not be used here. Do not retry it; tell the user instead.`;
    return denied(await recordTool(run, name, input, options, "denied", "deny", null, async () => ({ denied: true, reason })));
  }
  if (decision !== "approve" && (await approvalNeeded(ctx, name, input, options, needsApproval))) decision = "approve";
  let decidedBy: string | null = null;
  if (decision === "approve") {
    const requestSeq = await requestApproval(run, {
      stepName: `request-approval:${name}`,
      toolName: name,
      toolCallId: () => toolCallId,
      input,
      kind: "tool",
    });
    const answer = await awaitDecision(run, requestSeq, toolCallId);
    decidedBy = answer.by;
    if (!answer.approved) {
      return denied(await recordTool(run, name, input, options, "denied", "approve", decidedBy, async () => ({ denied: true, reason: answer.reason })));
    }
  }
  return recordTool(
    run,
    name,
    input,
    options,
    "succeeded",
    decision,
    decidedBy,
    (key, signal) =>
      Promise.resolve(
        // The caller's signal (generateText's abortSignal) and the step's (timeout, cancel, unload) both abort the tool.
        execute(input, {
          ...options,
          abortSignal: combined(signal, options.abortSignal),
          [IDEMPOTENCY_KEY]: key,
          [TOOL_CONTEXT]: ctx,
        } as ToolExecutionOptions),
      ),
    isolatedStep,
  );
}

/** An isolated tool's execution: its export with the tool's input, and its isolation options (StepOptions). */
type IsolatedToolStep = { fn: (call: StepCall) => Promise<unknown>; options: StepOptions };

/** The AI SDK's `needsApproval`: a boolean, or a function whose answer is recorded as a step. */
async function approvalNeeded(
  ctx: WorkflowContext,
  name: string,
  input: unknown,
  options: ToolExecutionOptions,
  needsApproval: NeedsApproval,
): Promise<boolean> {
  if (needsApproval === undefined || typeof needsApproval === "boolean") return needsApproval === true;
  const answer = await ctx.step(`needs-approval:${name}`, async () => needsApproval(input as never, needsApprovalOptions(options) as never));
  return answer === true;
}

function denied(value: unknown): unknown {
  if (typeof value === "object" && value !== null) denials.add(value);
  return value;
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
  isolatedStep?: IsolatedToolStep,
): Promise<unknown> {
  const state = agentState(run);
  return run.operation({
    kind: "tool",
    name,
    fingerprint: fingerprintOf(input),
    execute: isolatedStep?.fn ?? (({ idempotencyKey, signal }) => execute(idempotencyKey, signal)),
    ...(isolatedStep === undefined ? {} : { options: isolatedStep.options }),
    trace: toolSpan(name, options.toolCallId, status),
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

function combined(step: AbortSignal, caller: AbortSignal | undefined): AbortSignal {
  return caller === undefined ? step : AbortSignal.any([step, caller]);
}
