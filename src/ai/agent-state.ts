import type { DurableRun } from "../engine/durable-run.js";
import type { LastPrompt } from "./model-call-record.js";
import type { Pricing } from "./pricing.js";
import { Mutex } from "../store/mutex.js";
import { PromptMemo } from "./prompt-memo.js";

/**
 * What the agent helpers remember about one loaded run, rebuilt on replay as recorded operations
 * are returned: which model call asked for each tool call (provenance), which prompt messages are
 * already stored, and what the run has spent.
 */
export interface AgentRunState {
  readonly toolCallModelSeq: Map<string, number>;
  readonly storedMessages: Set<string>;
  costUsd: number;
  pricing: Pricing | undefined;
  /** The budget scope this run charges (its own run id), once opened. */
  scopeId: string | undefined;
  /** The last model call's prompt (live or replayed): the base of the next prompt's delta. */
  lastPrompt: LastPrompt | undefined;
  /**
   * The prompts model calls were sent, as far as the next call can reuse them: fingerprints and
   * message hashes of a growing conversation computed for the added messages only.
   */
  readonly promptMemo: PromptMemo;
  /** How many model handles with a budget of their own the run has made: names their scopes. */
  modelBudgets: number;
  /** The application's approval key: decisions must be signed with it (see approval-channel.ts). */
  approvalKey: Uint8Array | undefined;
  /** Orders model calls that check a budget before taking their seq (onBudgetExceeded: "ask"). */
  readonly modelOrder: Mutex;
}

const states = new WeakMap<DurableRun, AgentRunState>();
/** Approval keys of runs whose state is not made yet: most runs never need it (agent-context.ts). */
const pendingApprovalKeys = new WeakMap<DurableRun, Uint8Array>();

/** The application's approval key for this run's state, now or when the state is first made. */
export function setApprovalKey(run: DurableRun, key: Uint8Array): void {
  const state = states.get(run);
  if (state !== undefined) state.approvalKey = key;
  else pendingApprovalKeys.set(run, key);
}

export function agentState(run: DurableRun): AgentRunState {
  let state = states.get(run);
  if (state === undefined) {
    state = {
      toolCallModelSeq: new Map(),
      storedMessages: new Set(),
      costUsd: 0,
      pricing: undefined,
      scopeId: undefined,
      lastPrompt: undefined,
      promptMemo: new PromptMemo(),
      modelBudgets: 0,
      approvalKey: pendingApprovalKeys.get(run),
      modelOrder: new Mutex(),
    };
    states.set(run, state);
  }
  return state;
}
