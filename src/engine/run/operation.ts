import { RunNotFoundError } from "../../errors.js";
import type { StepKind, StepRecord, StepRow } from "../../store/store.js";
import type { OperationTrace, OperationTraceSpec } from "../tracing.js";
import { never, type Began, type JournalCore } from "./journal-core.js";

/**
 * A family of durable operations (a step, a sleep, a send, ...), as hooks on the one skeleton every
 * operation goes through (`perform`):
 *
 *   begin → replay → live → record → write → settle
 *
 * — take the call's identity and look up its record; hand a recorded outcome back at its turn;
 * otherwise wait for replay's clearance, act, build the record, commit it with its companion rows,
 * hand the outcome over at its turn, and return it (or throw the recorded failure).
 *
 * An operation whose live part does not end in one commit of its record (a transaction commits
 * inside its own SQL transaction, a receive inside the store, a sleep and a child's result may
 * unload the run) has no `record` hook: its `act` then does the live part itself, with the core's
 * helpers, and keeps the run's `active` count.
 *
 * The hooks are plain objects made once per family, not per call, and the skeleton adds no promise
 * to an operation's common path: a step costs what the hand-written method it replaces did.
 */
export interface DurableOperation<Call, Work, T> {
  /** Checks made at the call, before it takes an identity: a failure rejects the call. */
  validate?(run: JournalCore, name: string, call: Call): void;
  /** A record that does not end the operation (a sleep's start, a recv's deadline): the call goes on live from it. */
  pending?(row: StepRow): boolean;
  /** What a replayed record's value becomes for the caller (default: the value itself). */
  replayed?(run: JournalCore, began: Began, call: Call, value: unknown): T;
  /** Checks made only when the operation acts live: a replayed record is returned whatever they say. */
  check?(run: JournalCore, name: string, call: Call): void;
  /** False: a call without a record needs only a live run, not replay's clearance (`ctx.patched`). */
  readonly clears?: boolean;
  /** The live work: its result, or a promise of it. Without `record`, the operation's whole live part. */
  act(run: JournalCore, began: Began, call: Call): Work | Promise<Work>;
  /** The record of the work's outcome; sets `began.also` (rows committed with it) and `began.failed`/`thrown`. */
  record?(run: JournalCore, began: Began, call: Call, work: Work): StepRecord;
  /** The executor is poked after the commit: the operation enqueued work (a message, a child run). */
  readonly pokes?: boolean;
  /** The commit was refused because the destination run does not exist: record that as the outcome. */
  refused?(run: JournalCore, began: Began, call: Call, step: StepRecord, error: RunNotFoundError): Promise<T>;
  /** What the caller gets once the record is written (default: the work's result). */
  result?(run: JournalCore, began: Began, call: Call, work: Work): T;
  /** What a layer above says of the operation's span (run/steps.ts: `OperationSpec.trace`). */
  trace?(call: Call): OperationTraceSpec<Work> | undefined;
  /**
   * External synchrony: true when this call's record may commit without waiting to be durable
   * (`OperationSpec.deferDurability`). Such a call does not wait for the barrier before it acts.
   */
  defers?(call: Call, began: Began): boolean;
}

/** Runs one call of a durable operation through the skeleton (see DurableOperation). */
export async function perform<Call, Work, T>(
  run: JournalCore,
  op: DurableOperation<Call, Work, T>,
  call: Call,
  kind: StepKind,
  name: string,
  fingerprint?: string,
): Promise<T> {
  op.validate?.(run, name, call);
  const began = run.begin(name, kind, fingerprint);
  if (began === null) return never();
  const row = began.row;
  if (row !== undefined && (op.pending === undefined || !op.pending(row))) {
    // Replayed: no work was done, so no span (the run's span counts it).
    run.trace?.replayed();
    const value = await run.replayed(row);
    return op.replayed === undefined ? (value as T) : op.replayed(run, began, call, value);
  }
  op.check?.(run, name, call);
  if (row === undefined) {
    const cleared = op.clears === false ? run.live() : run.cleared(began);
    if (cleared !== true && !(await cleared)) return never();
  }
  // After a pause past the lease, the run may be a peer's by now: confirm before acting (see ownsRun).
  const owned = op.clears === false ? true : run.ownsRun();
  if (owned !== true && !(await owned)) return never();
  // External synchrony: nothing acts on the world while a record it may depend on could still be
  // erased by a power loss. Every live operation but a deferring one (a model call, which only
  // reads) first makes the store's deferred commits durable (JournalCore.barrier). A run loaded
  // from its journal needs no such care: its claim was a commit that waited for durability, and
  // made every row before it durable.
  const defers = op.defers?.(call, began) === true;
  // A sleep's end not yet committed (JournalCore.ride) lands before anything records past it. The
  // wait counts as acting: a run that looked idle meanwhile would unload and drop this operation.
  const landed = run.landRiders();
  if (landed !== true) {
    run.active++;
    try {
      if (!(await landed)) return never();
    } finally {
      run.settleActive();
    }
  }
  if (!defers && run.undurable() && !(await run.barrier())) return never();
  const spec = run.trace === undefined ? undefined : op.trace?.(call);
  const span = run.trace?.operation(kind, name, began.seq, began.identity, run.scope().identity, spec as OperationTraceSpec<never> | undefined);
  if (op.record === undefined) {
    if (span === undefined) return op.act(run, began, call) as Promise<T>;
    const acting = Promise.resolve(span.within(() => op.act(run, began, call))) as Promise<T>;
    acting.then(
      () => span.end({}),
      (error: unknown) => span.end({ error }),
    );
    return acting;
  }
  run.active++;
  let step: StepRecord | undefined;
  let work: Work | Promise<Work> | undefined;
  let unrecorded: unknown;
  // Whether the record reached the store: a run cancelled (fenced) while its record was being
  // committed has none, and its span must say the work was abandoned, not name a row.
  const written = { committed: false };
  let uncommitted = false;
  try {
    began.startedAt = run.clock.now();
    work = span === undefined ? op.act(run, began, call) : span.within(() => op.act(run, began, call));
    if (work instanceof Promise) work = await work;
    if (run.stopped) return never();
    step = op.record(run, began, call, work as Work);
    if (span !== undefined && began.also !== null) began.also = span.carry(began.also);
    try {
      if (!(await run.writeAndDeliver(step, began.also, op.pokes === true, written, defers))) {
        uncommitted = !written.committed;
        return never();
      }
    } catch (error) {
      if (op.refused === undefined || !(error instanceof RunNotFoundError)) throw error;
      return await op.refused(run, began, call, step, error);
    }
    if (began.failed) throw began.thrown;
    return op.result === undefined ? (work as unknown as T) : op.result(run, began, call, work as Work);
  } catch (error) {
    if (step === undefined) unrecorded = error;
    throw error;
  } finally {
    run.settleActive();
    span?.end(
      step !== undefined && !uncommitted
        ? { record: step, error: began.thrown, attributes: spec?.outcome?.(work as Work) }
        : unrecorded !== undefined
          ? { error: unrecorded }
          : { abandoned: true },
    );
  }
}
