import { randomUUID } from "node:crypto";
import { InvalidSpecError } from "../../errors.js";
import type { StepKind, StoredValue, WriteOp } from "../../store/store.js";
import { toStored } from "../../store/value/index.js";
import { runAttempts, type Outcome } from "../attempts.js";
import { isolatedExecute, validateIsolation } from "../isolation/index.js";
import type { StepCall, StepOptions } from "../context.js";
import { operationScopes, type OperationScope } from "../replay-journal.js";
import type { OperationTraceSpec } from "../tracing.js";
import { never, type JournalCore } from "./journal-core.js";
import { perform, type DurableOperation } from "./operation.js";

/**
 * Steps: a function run with retries whose outcome is recorded (`ctx.step`, and the operations the
 * layers above build the same way: model calls, tool calls), the recorded values `ctx.now`,
 * `ctx.random` and `ctx.uuid`, and `ctx.patched`.
 */

/** A durable operation for the layers above the engine; see `RunExecution.operation`. */
export interface OperationSpec<T> {
  kind: StepKind;
  name: string;
  /**
   * What the operation is called with, where the layer knows it (a prompt's hash, a tool input's
   * hash): recorded, and compared on replay, where a different one is a NonDeterminismError.
   */
  fingerprint?: string;
  execute: (call: StepCall & { seq: number }) => Promise<T> | T;
  options?: StepOptions;
  /** Rows to commit together with the checkpoint (a model call's record, a budget charge). */
  alsoWrite?: (outcome: { ok: true; value: T } | { ok: false; error: unknown }, seq: number) => WriteOp[];
  onRecorded?: (value: T, seq: number, live: boolean) => void;
  /** What the operation's span says when it acts live and a tracer records it (engine/tracing.ts). */
  trace?: OperationTraceSpec<Outcome<T>>;
  /**
   * External synchrony: commit the record without waiting for it to be durable (CommitOptions,
   * store.ts), for an operation whose outcome the world cannot see until the workflow acts on it
   * (a model call). The run makes it durable before its next operation of any other kind acts.
   * Honoured at the workflow's top only: inside a step's or tool's function, code that is not an
   * operation may act on the outcome at once, so a nested call's record waits as every record does.
   */
  deferDurability?: boolean;
}

/** Read, never written: a step without options shares this one. */
const NO_OPTIONS: StepOptions = Object.freeze({});

const stepOperation: DurableOperation<OperationSpec<unknown>, Outcome<unknown>, unknown> = {
  replayed(_run, began, spec, value) {
    spec.onRecorded?.(value, began.seq, false);
    return value;
  },
  check(_run, _name, spec) {
    validateStepOptions(spec.options ?? NO_OPTIONS);
    validateIsolation(spec.options ?? NO_OPTIONS, spec.execute);
  },
  act(run, began, spec) {
    const options = spec.options ?? NO_OPTIONS;
    // An isolated step's function runs in a pool process (isolation/): only where it runs differs.
    const execute =
      options.isolation === undefined
        ? spec.execute
        : isolatedExecute(run.host.isolation, spec.execute, options, { runId: run.runId, seq: began.seq, stepName: spec.name });
    // The function runs in a scope of its own: durable operations it calls are journaled inside it.
    const scope: OperationScope = { owner: run, identity: began.identity, key: began.key, calls: new Map() };
    return operationScopes.run(scope, () => runAttempts(run.attemptHost, spec.name, began.seq, execute, options, began.key));
  },
  record(run, began, spec, outcome) {
    let output: StoredValue | null = null;
    if (outcome.ok) {
      try {
        output = toStored(outcome.value, run.where(began.seq, spec.name));
        began.also = spec.alsoWrite?.({ ok: true, value: outcome.value }, began.seq) ?? null;
      } catch (unstorable) {
        began.failed = true;
        began.thrown = unstorable;
      }
    } else {
      began.also = spec.alsoWrite?.({ ok: false, error: outcome.error }, began.seq) ?? null;
      began.failed = true;
      began.thrown = outcome.error;
    }
    return run.record(began, began.startedAt, began.failed ? { error: began.thrown } : { output }, outcome.attempts);
  },
  result(_run, began, spec, outcome) {
    const value = (outcome as { value: unknown }).value;
    spec.onRecorded?.(value, began.seq, true);
    return value;
  },
  trace: (spec) => spec.trace,
  defers: (spec, began) => spec.deferDurability === true && !began.nested,
};

/**
 * The durable-operation primitive `ctx.step` is made of, open to the layers above the engine (model
 * calls, tool calls): runs `execute` with retries, records its outcome under `kind`, and commits
 * `alsoWrite`'s rows in the same transaction as the checkpoint. On replay `execute` does not run;
 * `onRecorded` sees the value (live or replayed) with its seq.
 */
export function operation<T>(run: JournalCore, spec: OperationSpec<T>): Promise<T> {
  return perform(run, stepOperation as DurableOperation<OperationSpec<T>, Outcome<T>, T>, spec, spec.kind, spec.name, spec.fingerprint);
}

/** A value made once, live, and recorded: replay returns the record. */
function recordedValue<T>(produce: (run: JournalCore) => T): DurableOperation<undefined, T, T> {
  return {
    act: (run) => produce(run),
    record: (run, began, _call, value) => run.record(began, run.clock.now(), { output: toStored(value, "") }, 1),
  };
}

const nowOperation = recordedValue((run) => run.clock.now());
const randomOperation = recordedValue(() => Math.random());
const uuidOperation = recordedValue(() => randomUUID());

export function now(run: JournalCore): Promise<number> {
  return perform(run, nowOperation, undefined, "now", "now");
}

export function random(run: JournalCore): Promise<number> {
  return perform(run, randomOperation, undefined, "random", "random");
}

export function uuid(run: JournalCore): Promise<string> {
  return perform(run, uuidOperation, undefined, "uuid", "uuid");
}

const patchOperation: DurableOperation<undefined, true, boolean> = {
  replayed: () => true,
  // A patch without a record needs only a live run: it does not wait for replay's clearance.
  clears: false,
  act: () => true,
  record: (run, began) => run.record(began, run.clock.now(), { output: toStored(true, "") }, 1),
};

export async function patched(run: JournalCore, name: string): Promise<boolean> {
  if (run.stopped) return never();
  // A run replaying code from before the patch has no record of it here: it went past this point
  // under the old code, and keeps the old path (taking no identity, so nothing after it shifts).
  if (run.peek("patch", name) === undefined && run.replayingHere) return false;
  return perform(run, patchOperation, undefined, "patch", name);
}

function validateStepOptions(options: StepOptions): void {
  const { retries, timeoutMs } = options;
  if (retries !== undefined && (!Number.isInteger(retries) || retries < 0)) {
    throw new InvalidSpecError("retries", retries, "must be an integer ≥ 0");
  }
  if (timeoutMs !== undefined && (!Number.isFinite(timeoutMs) || timeoutMs <= 0)) {
    throw new InvalidSpecError("timeoutMs", timeoutMs, "must be a number of milliseconds > 0");
  }
}
