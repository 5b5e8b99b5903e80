import { CancelledError, InvalidSpecError, RunNotFoundError } from "../../errors.js";
import type { RunRow, StepRecord, StepRow, WriteOp } from "../../store/store.js";
import { errorFromText, errorText, storedText, toStored } from "../../store/value/index.js";
import { SHUTDOWN_TOPIC, type ChildCancelOptions, type ChildExit, type ChildHandle, type ChildOptions, type ChildWorkflow } from "../context.js";
import { validateRunId } from "../names.js";
import { never, type Began, type JournalCore } from "./journal-core.js";
import { sendReserved } from "./messages.js";
import { perform, type DurableOperation } from "./operation.js";
import { childExit, select } from "./select.js";

/**
 * Child runs: `ctx.child` (the child's row committed with the parent's record of it, under an id
 * stable across replays) and a child's `result()` (a durable wait the child's end wakes).
 */

/** How often a run waiting on a child that is not its own (a fork's inherited child) looks again. */
const FOREIGN_CHILD_POLL_MS = 2_000;

interface Start {
  workflow: ChildWorkflow<unknown, unknown>;
  input: unknown;
  options: ChildOptions;
}

const startOperation: DurableOperation<Start, string, ChildHandle<unknown>> = {
  validate(_run, _name, start) {
    if (start.options.id !== undefined) validateRunId(start.options.id, "id");
  },
  replayed: (run, _began, _start, childId) => handle(run, childId as string),
  act(run, began, start) {
    const id = start.options.id;
    return id === undefined ? `${run.runId}:${began.seq}` : adoptable(run, id);
  },
  record(run, began, start, childId) {
    const now = run.clock.now();
    const own = start.options.timeoutMs === undefined ? null : now + start.options.timeoutMs;
    const inherited = run.run.deadlineAt;
    const deadlineAt = own === null ? inherited : inherited === null ? own : Math.min(own, inherited);
    const childRun: WriteOp = {
      type: "run",
      run: {
        id: childId,
        workflow: start.workflow.name,
        status: "enqueued",
        input: toStored(start.input, `input of child ${childId}`),
        parentId: run.runId,
        parentSeq: began.seq,
        rootId: run.run.rootId,
        appVersion: run.run.appVersion,
        executorId: null,
        deadlineAt,
        createdAt: now,
        forkedFrom: null,
        forkedFromSeq: null,
      },
    };
    began.also = [childRun];
    return run.record(began, now, { output: toStored(childId, "") }, 1);
  },
  pokes: true,
  result: (run, _began, _start, childId) => handle(run, childId),
};

/**
 * A chosen id must be new (or this run's own child from before a crash): a child's end wakes only
 * its parent, so adopting someone else's run would wait forever.
 */
async function adoptable(run: JournalCore, id: string): Promise<string> {
  const existing = await run.store.getRun(id);
  if (existing !== undefined && existing.parentId !== run.runId) {
    throw new InvalidSpecError("id", id, "a run with this id already exists and is not a child of this run; choose a new id");
  }
  return id;
}

export function child<Input, Output>(
  run: JournalCore,
  workflow: ChildWorkflow<Input, Output>,
  input: Input,
  options: ChildOptions,
): Promise<ChildHandle<Output>> {
  return perform(run, startOperation, { workflow, input, options }, "child", workflow.name) as Promise<ChildHandle<Output>>;
}

function handle<Output>(run: JournalCore, childId: string): ChildHandle<Output> {
  const h: ChildHandle<Output> = {
    id: childId,
    result: () => perform(run, resultOperation, undefined, "child-result", childId) as Promise<Output>,
    cancel: (options) => cancelChild(run, h, options ?? {}),
  };
  return h;
}

/**
 * `handle.cancel({ graceMs })` (see ChildHandle.cancel): with a grace period, a shutdown request
 * (a send on SHUTDOWN_TOPIC) and a select on the child's end against the grace's timer come first —
 * each its own journal entry — and the cancel only if the child has not ended by then.
 */
async function cancelChild(run: JournalCore, child: ChildHandle<unknown>, options: ChildCancelOptions): Promise<ChildExit> {
  const graceMs = options.graceMs ?? 0;
  if (typeof graceMs !== "number" || Number.isNaN(graceMs) || graceMs < 0) {
    throw new InvalidSpecError("graceMs", graceMs, `cancelling child ${child.id}: a number of milliseconds ≥ 0, or Infinity`);
  }
  if (graceMs > 0) {
    await sendReserved(run, child.id, SHUTDOWN_TOPIC, { from: run.runId, graceMs: Number.isFinite(graceMs) ? graceMs : null });
    const won = await select<number>(run, `shutdown:${child.id}`, Number.isFinite(graceMs) ? [child, { timeoutMs: graceMs }] : [child]);
    if (won.kind === "child") {
      const { key: _key, kind: _kind, ...exit } = won;
      return exit;
    }
  }
  return perform(run, cancelOperation, undefined, "child-cancel", child.id);
}

const cancelOperation: DurableOperation<undefined, ChildExit, ChildExit> = {
  async act(run, began) {
    const childId = began.name;
    try {
      const before = await run.store.getRun(childId);
      if (before === undefined) throw new RunNotFoundError(childId);
      if (before.parentId !== run.runId && (run.run.forkedFrom === null || before.parentId !== run.run.forkedFrom)) {
        throw new InvalidSpecError("child", childId, `run ${run.runId} may cancel only its own children`);
      }
      const error = errorText(new CancelledError(`run ${childId} was cancelled by its parent ${run.runId}`, { runId: childId }));
      const cancelled = await run.store.cancelRun(childId, error, run.clock.now());
      // Stop the ones loaded in this process at once; other executors hear it from the store.
      run.host.stopRuns?.(cancelled);
      const after = await run.store.getRun(childId);
      return (after === undefined ? null : childExit(after)) ?? { childId, status: "cancelled", error: errorFromText(error) };
    } catch (error) {
      if (error instanceof InvalidSpecError || error instanceof RunNotFoundError) throw error;
      return run.storeFailed(error);
    }
  },
  record: (run, began, _call, exit) => run.record(began, run.clock.now(), { output: toStored(exit, run.where(began.seq, began.name)) }, 1),
};

const resultOperation: DurableOperation<undefined, unknown, unknown> = {
  validate: (run, childId) => run.refuseNestedWait("a child's result()", childId),
  act: childResult,
};

async function childResult(run: JournalCore, began: Began): Promise<unknown> {
  const childId = began.name;
  run.active++;
  try {
    let child: RunRow | undefined;
    try {
      child = await run.store.getRun(childId);
    } catch (error) {
      return run.storeFailed(error);
    }
    if (child === undefined) throw new RunNotFoundError(childId);
    if (child.status === "succeeded" || child.status === "failed" || child.status === "cancelled") {
      const now = run.clock.now();
      const outcome = child.status === "succeeded" ? { output: storedText(child.output ?? '{"$c":"undefined"}') } : { errorText: child.error };
      const step = run.record(began, now, outcome, 1);
      if (!(await run.writeAndDeliver(step))) return never();
      return run.replay({ ...toRow(step), output: child.output });
    }
    // A fork waits on its original's children: their end wakes the original, not the fork, so the
    // fork looks again every few seconds instead.
    const wakeAt = child.parentId === run.runId ? null : run.clock.now() + FOREIGN_CHILD_POLL_MS;
    // A warm wake-up looks again as replay would (a call without a record: a live run).
    const again = () => (run.live() ? childResult(run, began) : never());
    return run.waitFor(began.seq, { wakeAt, topic: null, childRunId: childId }, again);
  } finally {
    run.settleActive();
  }
}

function toRow(step: StepRecord): StepRow {
  return {
    ...step,
    output: step.output?.text ?? null,
    outputHash: step.output?.hash ?? null,
    storedPath: step.path ?? null,
    completion: step.completion ?? null,
    fingerprint: step.fingerprint ?? null,
  };
}
