import { CairnError } from "../errors.js";
import type { Fence, RunRow, StepKind, StepRow, Store } from "../store/store.js";
import type { Clock } from "./clock.js";
import type { WorkflowContext } from "./context.js";
import { RunExecution, type OperationSpec } from "./run-execution.js";

/**
 * What the layers above the engine (agents) may use of a run beyond the public context: the
 * durable-operation primitive, a look at the journal's next record, and the run's own row. Not part
 * of the public API.
 */
export interface DurableRun extends WorkflowContext {
  operation<T>(spec: OperationSpec<T>): Promise<T>;
  peek(kind: StepKind, name: string, fingerprint?: string): StepRow | undefined;
  readonly isReplaying: boolean;
  /** Whether the caller's scope still has recorded operations to replay: the run went past here before. */
  readonly replayingHere: boolean;
  readonly info: Readonly<RunRow>;
  /** This executor's claim on the run: a commit under it fails once another executor took the run over. */
  readonly fence: Fence;
  readonly store: Store;
  readonly clock: Clock;
}

export type { OperationSpec };

export function durableRun(ctx: WorkflowContext): DurableRun {
  const inner = (ctx as { [DURABLE_RUN]?: WorkflowContext })[DURABLE_RUN] ?? ctx;
  if (inner instanceof RunExecution) return inner;
  throw new CairnError("this context does not belong to a Cairn run: call agent helpers with the ctx your workflow received");
}

/** A context that wraps another (the agent context) points at the run's own context here. */
export const DURABLE_RUN = Symbol.for("cairn.durableRun");
