import { InvalidSpecError, NonDeterminismError, RunNotFoundError, FencedError } from "../../errors.js";
import type { CommitOptions, RunRow, StepKind, StepRecord, StepRow, StoredValue, WriteOp } from "../../store/store.js";
import { errorFromText, errorText, fromStored } from "../../store/value/index.js";
import { CompletionOrder } from "../completion-order.js";
import { validateOperationName } from "../names.js";
import { ReplayJournal, operationBase, operationScopes, storedPath, topScope, type OperationScope } from "../replay-journal.js";
import { DueOrder } from "./due-order.js";
import { JournalWatch } from "./journal-watch.js";
import { RunLifecycle, never, type ExecutionHost } from "./lifecycle.js";

export { never, type ExecutionHost, type Wait } from "./lifecycle.js";

/**
 * How long replay waits for the workflow to call the operation whose recorded outcome comes next
 * before it reports the run as diverged (see CompletionOrder). Generous: user code may legitimately
 * await timers between durable operations (the AI SDK's retry delays, for one).
 */
export const DEFAULT_REPLAY_STALL_MS = 30_000;

const DEFERRED: CommitOptions = Object.freeze({ deferDurability: true });

/**
 * One call of a durable operation: its place in the journal (seq, identity, path, key), the record
 * replay found for it, and — filled in as the operation goes live — what it will commit. One object
 * per call, made by `begin`; the skeleton (operation.ts) and the rooms keep their state in it rather
 * than allocating more.
 */
export interface Began {
  seq: number;
  /** This operation's identity (see replay-journal.ts): the scope of whatever it calls. */
  identity: string;
  /** Its `path` column. */
  path: string | null;
  /** Its idempotency key: `runId:seq` at the workflow's top, `<enclosing key>/<kind>:<name>#<n>` inside a step. */
  key: string;
  kind: StepKind;
  name: string;
  fingerprint: string | undefined;
  row: StepRow | undefined;
  /** Called inside another operation (a step's function), which keeps the run loaded meanwhile. */
  nested: boolean;
  /** For a call without a record during replay: resolves when it may go ahead (ReplayJournal.clearance). */
  clearance: Promise<void> | null;
  /** When it went live. */
  startedAt: number;
  /** Rows to commit together with its record (a message, an event, a child's run, a model call's row). */
  also: WriteOp[] | null;
  /** Whether its recorded outcome is a failure, and what the workflow is then thrown. */
  failed: boolean;
  thrown: unknown;
}

/**
 * One loaded run's journal: the position in it (identities, records, the order outcomes are handed
 * over in), divergence, and the writes under the run's fence; how the run ends is its lifecycle's
 * (lifecycle.ts). The durable operations (the rooms beside this file) are built on it through the
 * skeleton in operation.ts; RunExecution (run-execution.ts) is the context the workflow sees.
 *
 * The journal is read once, when the run is loaded; after that the position lives in memory and
 * each operation does one write. Members the rooms use are public; none is part of the API.
 */
export class JournalCore extends RunLifecycle {
  readonly journal: ReplayJournal;
  /** The order outcomes are handed to the workflow in, live and on replay. */
  readonly order: CompletionOrder;
  readonly topScope: OperationScope;
  /** The rows that could still change under the run, for a warm continuation's check (journal-watch.ts). */
  readonly watch: JournalWatch;
  /** Calls made during replay that the journal has no record of (for a divergence's message). */
  private readonly unrecordedCalls: string[] = [];
  private waitingForClearance = 0;
  /** Operations whose time has passed go on in the order it passed (see inDueOrder). */
  private readonly dueOrder: DueOrder;

  constructor(host: ExecutionHost, run: RunRow, journal: readonly StepRow[], replayStallMs: number) {
    super(host, run);
    this.topScope = topScope(this, run.id);
    this.journal = new ReplayJournal(journal);
    this.watch = new JournalWatch(journal);
    this.dueOrder = new DueOrder(journal, replayStallMs);
    this.order = new CompletionOrder(this.journal.replayOrdinals, this.journal.highestOrdinal, replayStallMs, (ordinal) => this.stalled(ordinal));
  }

  /**
   * The journal's record for the next operation of this kind and name called from here, if any:
   * lets a layer above tell replay from live without taking the record.
   */
  peek(kind: StepKind, name: string, fingerprint?: string): StepRow | undefined {
    const scope = this.scope();
    const occurrence = scope.calls.get(operationBase(scope.identity, kind, name, fingerprint)) ?? 0;
    return this.journal.look(scope.identity, kind, name, fingerprint, occurrence);
  }

  /**
   * True while recorded operations remain to be asked for, or their outcomes to be handed to the
   * workflow (see WorkflowContext).
   */
  get isReplaying(): boolean {
    return this.order.replaying() || this.journal.replaying();
  }

  /** Whether the caller's own scope still has recorded operations to replay: it ran past here before. */
  get replayingHere(): boolean {
    return this.journal.replayingIn(this.scope().identity);
  }

  // ---- identity and replay ----------------------------------------------------------------------

  /**
   * Takes the next position in the caller's scope (synchronously, so operations called in the same
   * order number the same way on every replay) and looks up the journal's record at that path.
   * Returns null if the record contradicts the call: the run has then been failed with a
   * NonDeterminismError naming both.
   */
  begin(name: string, kind: StepKind, fingerprint?: string): Began | null {
    if (this.stopped) return null;
    validateOperationName(kind, name);
    const scope = this.scope();
    if (scope.refuse !== undefined) {
      throw new InvalidSpecError(
        "operation",
        `${kind} "${name}"`,
        `durable operations cannot be called inside ${scope.refuse}'s function (run ${this.runId}): its SQL commits ` +
          "together with the step's own record, so nothing inside it can be journaled apart; call it before or after",
      );
    }
    const base = operationBase(scope.identity, kind, name, fingerprint);
    const occurrence = scope.calls.get(base) ?? 0;
    scope.calls.set(base, occurrence + 1);
    const row = this.journal.empty ? undefined : this.journal.take(scope.identity, kind, name, fingerprint, occurrence);
    const nested = scope !== this.topScope;
    const seq = row?.seq ?? this.journal.newSeq();
    this.watch.taken(seq, row !== undefined);
    const began: Began = {
      seq,
      identity: `${base}#${occurrence}`,
      path: storedPath(scope.identity, occurrence),
      key: nested ? `${scope.key}/${kind}:${name}#${occurrence}` : `${this.runId}:${seq}`,
      kind,
      name,
      fingerprint,
      row,
      nested,
      clearance: row === undefined && !this.journal.empty ? this.journal.clearance(scope.identity, kind, name) : null,
      startedAt: 0,
      also: null,
      failed: false,
      thrown: undefined,
    };
    if (row !== undefined && fingerprint !== undefined && row.fingerprint !== null && row.fingerprint !== fingerprint) {
      this.diverged(
        `at seq ${row.seq}: the journal recorded ${kind} "${name}" with fingerprint ${row.fingerprint} but the code ` +
          `called it with fingerprint ${fingerprint}`,
        row.seq,
      );
      return null;
    }
    if (row === undefined && this.order.replaying())
      this.unrecordedCalls.push(`${kind} "${name}"${fingerprint === undefined ? "" : ` (fingerprint ${fingerprint})`}`);
    return began;
  }

  /**
   * Whether a call without a record may act now: during replay it first waits until no record of
   * its kind and name is left uncalled (ReplayJournal.clearance), so a divergent call never reaches
   * the outside world. A promise only when it waits: a live call's common path costs none.
   */
  cleared(began: Began): Promise<boolean> | boolean {
    return began.clearance === null ? this.live() : this.clearedLater(began.clearance);
  }

  private async clearedLater(clearance: Promise<void>): Promise<boolean> {
    this.waitingForClearance++;
    try {
      await clearance;
    } finally {
      this.waitingForClearance--;
    }
    return this.live();
  }

  /**
   * Refuses a wait that only a message or another run can end inside a step's function: the step
   * keeps the run loaded, and such waits end by unloading and waking the run.
   */
  refuseNestedWait(what: string, name: string): void {
    if (this.scope() === this.topScope) return;
    throw new InvalidSpecError(
      "operation",
      `${what} "${name}"`,
      `${what} cannot wait inside a step's or tool's function (run ${this.runId}): the step keeps the run loaded, and ` +
        "this wait ends only when the run unloads and is woken; call it from the workflow itself",
    );
  }

  /** The scope the caller runs in: its enclosing operation's, or the workflow's top. */
  scope(): OperationScope {
    const scope = operationScopes.getStore();
    return scope !== undefined && scope.owner === this ? scope : this.topScope;
  }

  /** Hands a recorded outcome to the workflow at its turn: its value, or its error thrown. */
  async replayed(row: StepRow): Promise<unknown> {
    if (!(await this.delivered(row.completion))) return never();
    return this.replay(row);
  }

  /** Waits for this outcome's turn (see CompletionOrder); false if the run stopped meanwhile. */
  delivered(completion: number | null): Promise<boolean> | boolean {
    const turn = this.order.deliver(completion);
    // The common case — its turn, now — costs no promise.
    return turn === null ? this.handedOver() : turn.then(() => this.handedOver());
  }

  private handedOver(): boolean {
    this.scheduleSuspendCheck();
    return !this.stopped;
  }

  /** A record's outcome: its value, or its error thrown. */
  replay(row: StepRow): unknown {
    if (row.status === "failed") throw errorFromText(row.error ?? '{"name":"Error","message":"unknown"}');
    return fromStored(row.output);
  }

  /** Replay waited in vain for the operation whose outcome comes next: the code took another path. */
  private stalled(ordinal: number): void {
    const row = this.journal.byOrdinal(ordinal);
    const what = row === undefined ? `completion ${ordinal}` : `${row.kind} "${row.name}" at seq ${row.seq}`;
    const instead =
      this.unrecordedCalls.length === 0 ? "" : `; it called ${this.unrecordedCalls.slice(0, 5).join(", ")}, which the journal has no record of,`;
    this.diverged(
      `: the journal recorded ${what} as the next operation to complete, but replay has not called it${instead} ` +
        "(the code no longer calls it, calls it differently, or calls it only after something that was not recorded)",
      row?.seq,
    );
  }

  /** Whether the run is busy with replay: outcomes wait for their turn, or calls for their clearance. */
  protected busy(): boolean {
    return this.order.busy() || this.waitingForClearance !== 0;
  }

  private diverged(detail: string, seq: number | undefined): void {
    const error = new NonDeterminismError(
      `run ${this.runId} (workflow "${this.workflowName}") is not deterministic${detail.startsWith(":") ? "" : " "}${detail}. The workflow code changed ` +
        "under an in-flight run, or branches on something not recorded. Route nondeterminism through ctx, guard code " +
        "changes with ctx.patched(name), then `cairn resume` the run.",
      { runId: this.runId, seq },
    );
    void this.settle("failed", error);
  }

  // ---- records and writes -----------------------------------------------------------------------

  /**
   * A journal record for the operation `began` names. Its completion ordinal is taken now, unless
   * given (null: a record whose outcome the workflow does not see yet, a sleep's start).
   */
  record(
    began: Began,
    startedAt: number,
    outcome: { output?: StoredValue | null; error?: unknown; errorText?: string | null },
    attempts: number,
    completion: number | null = this.order.reserve(),
  ): StepRecord {
    const failed = "error" in outcome || outcome.errorText !== undefined;
    return {
      runId: this.runId,
      seq: began.seq,
      name: began.name,
      kind: began.kind,
      status: failed ? "failed" : "succeeded",
      output: failed ? null : (outcome.output ?? null),
      error: outcome.errorText !== undefined ? (outcome.errorText ?? errorText(new Error("unknown error"))) : failed ? errorText(outcome.error) : null,
      startedAt,
      finishedAt: this.clock.now(),
      attempts,
      path: began.path,
      completion,
      fingerprint: began.fingerprint ?? null,
    };
  }

  /**
   * Commits ops under this run's fence; false means the run was lost (and is now released).
   * `deferDurability`: see CommitOptions (store.ts) — only for a record nothing outside depends on yet.
   */
  async write(ops: WriteOp[], outcome?: { committed: boolean }, deferDurability = false): Promise<boolean> {
    try {
      await (deferDurability ? this.commit(ops, DEFERRED) : this.commit(ops));
      if (outcome !== undefined) outcome.committed = true;
      return !this.stopped;
    } catch (error) {
      if (error instanceof FencedError) {
        this.lost();
        return false;
      }
      // Only a message op fails so (its destination run does not exist): the sender records it.
      if (error instanceof RunNotFoundError) throw error;
      // The database failed under us: give the run back to the executor to load again later.
      if (!this.stopped) {
        this.stop(error);
        this.letGo("store-error", error);
      }
      return false;
    }
  }

  protected override committed(ops: readonly WriteOp[]): void {
    this.watch.wrote(ops);
  }

  /**
   * Lets an operation whose time has passed (a sleep's end, a select's or a receive's deadline) take
   * its ordinal in the order the times fell due, not in the order its code got here (DueOrder).
   * False: the run stopped meanwhile.
   */
  inDueOrder(dueAt: number, seq: number): Promise<boolean> | true {
    // A run doing nothing else (a run that wakes from its one sleep) has nothing to order it with.
    if (this.aloneWith(seq) && this.dueOrder.passAlone(dueAt, seq)) return true;
    return this.dueOrder.wait(dueAt, seq).then(() => this.live());
  }

  /**
   * A record that need not be committed before the workflow goes on: the end of a top-level sleep
   * whose time has come while nothing else of the run acts or waits (timers.ts,
   * RunLifecycle.aloneWith). Its loss costs nothing — a replay that finds the sleep's time passed
   * ends it again, as it would have ended live, and nothing else of the run could have ended before
   * it. It is committed, at the latest, before the run's next durable operation acts (`landRiders`,
   * called by every live operation and by the rooms that record by statements of their own), or
   * with the run's suspend or finish, whichever comes first; any commit of the run meanwhile carries it (RunLifecycle.commit). So a record of
   * the same branch past the sleep never reaches the journal without it, and the order outcomes
   * were handed over in stays whole. A run that wakes and finishes makes one commit, not two
   * (10,000 runs falling due at once); one that wakes and steps makes two, as before.
   */
  ride(op: WriteOp): void {
    this.riders.push(op);
  }

  /**
   * Makes sure the records riding with the run have landed before the caller records past them
   * (see `ride`): commits them now, or waits for the commit that carries them. False: the run was
   * lost (or its store failed) meanwhile, as `write`.
   */
  landRiders(): Promise<boolean> | boolean {
    return this.riders.length === 0 && this.carrying() === 0 ? true : this.landAll();
  }

  private async landAll(): Promise<boolean> {
    // Until none waits and none is in flight: a carrier that failed put its riders back.
    while (this.riders.length > 0 || this.carrying() > 0) {
      if (this.stopped) return false;
      if (this.riders.length > 0) {
        if (!(await this.write([]))) return false;
      } else {
        await Promise.all(this.carriers!); // carrying() > 0: made
      }
    }
    return !this.stopped;
  }

  /**
   * Writes a step's record with `also` in one commit (poking the executor after it if `poke`: it
   * enqueued work), then waits for its turn to be handed over.
   */
  async writeAndDeliver(
    step: StepRecord,
    also: WriteOp[] | null = null,
    poke = false,
    outcome?: { committed: boolean },
    deferDurability = false,
  ): Promise<boolean> {
    const ops: WriteOp[] = also === null || also.length === 0 ? [{ type: "step", step }] : [...also, { type: "step", step }];
    if (!(await this.write(ops, outcome, deferDurability))) return false;
    if (poke) this.host.poke();
    return this.delivered(step.completion ?? null);
  }

  /**
   * External synchrony: whether some commit of this store resolved without waiting to be durable
   * and no barrier has covered it since (the store's watermark, DurabilityWatermark).
   */
  undurable(): boolean {
    const { deferred, durable } = this.store.durability;
    return durable < deferred;
  }

  /**
   * Makes every deferred commit of the store durable before the caller acts on the world: one
   * commit of a barrier op under the run's fence, which waits for its fsync (SQLite) or WAL flush
   * (PostgreSQL) and covers every commit before it. Concurrent barriers share one group commit.
   * False: the run was lost meanwhile (as `write`).
   */
  barrier(): Promise<boolean> {
    return this.write([{ type: "barrier", runId: this.runId, at: this.clock.now() }]);
  }

  where(seq: number, name: string): string {
    return `run ${this.runId} seq ${seq} ("${name}")`;
  }
}
