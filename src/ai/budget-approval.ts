import { BudgetExceededError } from "../errors.js";
import type { DurableRun } from "../engine/durable-run.js";
import { exceeded, extendOp, scopeChain, type Budget } from "./budget.js";
import { awaitDecision } from "./approval-channel.js";
import { requestApproval } from "./durable-tools.js";

interface Overrun {
  scopeRunId: string;
  budget: keyof Budget;
  limit: number;
  spent: number;
}

/**
 * `onBudgetExceeded: "ask"`: before a model call, if a budget in the run's chain is spent, record an
 * approval request (kind "budget", tool call id `budget:<seq>`) and wait for a decision, holding no
 * memory. Approved: the spent budget is raised by its original limit and the call goes ahead.
 * Denied: the run fails with a BudgetExceededError.
 *
 * Deterministic on replay: whether the run asked is read from the journal (the next record is the
 * request, or the model call itself), never from the budget's current state.
 */
export async function askForMoreIfSpent(run: DurableRun, scopeId: string): Promise<void> {
  // Which check this is (the run's n-th model call asks here): a request is recorded under it, so
  // replay finds the request made before this model call, not one made before another.
  const check = `check-${nextCheck(run)}`;
  for (;;) {
    // Replaying past this point without a request on record: live, the run did not ask here.
    const next = run.peek("step", "request-approval:budget", check);
    if (next === undefined && run.replayingHere) return;
    let overrun: Overrun | undefined;
    if (next === undefined) {
      const error = exceeded(await scopeChain(run, scopeId), run.clock.now(), run.runId);
      if (error === null) return;
      overrun = error as unknown as Overrun;
    }
    const requestSeq = await requestApproval(run, {
      stepName: "request-approval:budget",
      fingerprint: check,
      toolName: overrun?.budget ?? "budget",
      toolCallId: (seq) => `budget:${seq}`,
      input: overrun === undefined ? null : { budget: overrun.budget, limit: overrun.limit, spent: overrun.spent, scope: overrun.scopeRunId },
      kind: "budget",
    });
    const requestId = `budget:${requestSeq}`;
    const decision = await awaitDecision(run, requestSeq, requestId);
    if (!decision.approved) {
      throw new BudgetExceededError(
        `run ${run.runId} spent a budget and the request for more (${requestId}) was denied${decision.by === null ? "" : ` by ${decision.by}`}` +
          `${decision.reason === null ? "" : `: ${decision.reason}`}`,
        { runId: run.runId },
      );
    }
    let raise: Parameters<typeof extendOp> | undefined;
    await run.operation({
      kind: "step",
      name: "extend-budget",
      execute: async () => {
        const chain = await scopeChain(run, scopeId);
        const error = exceeded(chain, run.clock.now(), run.runId) as unknown as Overrun | null;
        if (error === null) return null;
        const scope = chain.find((s) => s.run_id === error.scopeRunId)!;
        raise = [scope, { [error.budget]: error.limit }];
        return { scope: error.scopeRunId, budget: error.budget, by: error.limit };
      },
      alsoWrite: () => (raise === undefined ? [] : [extendOp(...raise)]),
    });
  }
}

const checks = new WeakMap<DurableRun, number>();

function nextCheck(run: DurableRun): number {
  const n = checks.get(run) ?? 0;
  checks.set(run, n + 1);
  return n;
}
