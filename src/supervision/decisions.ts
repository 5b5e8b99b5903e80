import type { WorkflowContext } from "../engine/context.js";
import type { OperationSpec } from "../engine/run-execution.js";

/** The decisions a supervisor records (`cairn_supervision.event`). */
export type DecisionEvent = "start" | "exit" | "restart" | "stop" | "drop" | "give_up";

export interface Decision {
  event: DecisionEvent;
  childId: string | null;
  childRunId: string | null;
  previousRunId?: string | null;
  reason?: string | null;
  restartCount: number;
  at: number;
}

/** The run context as a supervisor uses it: the engine's operation primitive, for its decision rows. */
export interface SupervisorContext extends WorkflowContext {
  operation<T>(spec: OperationSpec<T>): Promise<T>;
}

/**
 * Records one decision: a journal entry (kind `supervise`, named by the event) and its
 * `cairn_supervision` row, committed together.
 *
 * Failure semantics: written once — replay returns the record and writes no row again; a crash
 * before the commit leaves neither, and the replayed supervisor makes the same decision again.
 */
export async function decide(ctx: SupervisorContext, decision: Decision): Promise<void> {
  await ctx.operation<Decision>({
    kind: "supervise",
    name: decision.event,
    execute: () => decision,
    alsoWrite: (outcome, seq) =>
      outcome.ok
        ? [
            {
              type: "insert",
              table: "cairn_supervision",
              values: {
                run_id: ctx.runId,
                seq,
                event: decision.event,
                child_id: decision.childId,
                child_run_id: decision.childRunId,
                previous_run_id: decision.previousRunId ?? null,
                reason: decision.reason ?? null,
                restart_count: decision.restartCount,
                at: decision.at,
              },
            },
          ]
        : [],
  });
}
