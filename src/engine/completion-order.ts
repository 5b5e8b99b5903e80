/**
 * The order in which a run's workflow sees its durable operations complete, kept the same live and
 * on replay. This is what makes concurrent branches replay exactly (docs/replay.md).
 *
 * Live, each completed operation takes the next ordinal when its record is written (the ordinal is
 * part of the record), and outcomes are handed to the workflow one at a time in ordinal order, with
 * a turn of the event loop between two hand-overs: the workflow's microtasks run to quiescence
 * after each, so whatever it calls in reaction to one completion it calls before it sees the next.
 * On replay the recorded outcomes are handed over in their recorded order under the same rule, so
 * the workflow calls the same operations in the same order it did live — and a branch whose
 * recorded step finished last live also finishes last on replay, whatever the latency now.
 *
 * Recorded ordinals always come before live ones: every operation a run recorded was called
 * without waiting for an outcome that was not recorded, so all of them are called (and handed over)
 * before any live outcome is. A recorded operation that the workflow never calls holds back the
 * live outcomes behind it: after `stallMs` of that, `onStall` reports the divergence.
 */
export class CompletionOrder {
  /** Ordinals still to hand over, ascending: the recorded ones first, then live ones as reserved. */
  private readonly expected: number[];
  private head = 0;
  /** Hand-overs that arrived and wait for their turn (made by the first: most runs hand over in turn). */
  private arrived: Map<number, () => void> | undefined;
  private nextLive: number;
  private readonly firstLive: number;
  /** The event-loop turn of the last hand-over (see `turns`): the next waits for a later turn. */
  private lastTurn = -1;
  private stallTimer: NodeJS.Timeout | undefined;
  private stalledAt = -1;
  private closed = false;

  constructor(
    recorded: readonly number[],
    /** Every ordinal in the journal, including those never handed over again (nested in a recorded step). */
    highestRecorded: number,
    private readonly stallMs: number,
    private readonly onStall: (ordinal: number) => void,
  ) {
    this.expected = [...recorded].sort((a, b) => a - b);
    this.nextLive = highestRecorded + 1;
    this.firstLive = this.nextLive;
  }

  /** Takes the ordinal for an outcome about to be recorded live. */
  reserve(): number {
    const ordinal = this.nextLive++;
    this.expected.push(ordinal);
    return ordinal;
  }

  /** An ordinal reserved for an outcome that will not be recorded after all (a receive that waits). */
  release(ordinal: number): void {
    const at = this.expected.indexOf(ordinal, this.head);
    if (at >= 0) this.expected.splice(at, 1);
    this.pump();
  }

  /** Whether outcomes wait for their turn, or recorded ones remain: the run is not idle. */
  busy(): boolean {
    return (this.arrived?.size ?? 0) > 0 || this.replaying();
  }

  /** Whether any recorded outcome is still to be handed over. */
  replaying(): boolean {
    const next = this.expected[this.head];
    return next !== undefined && next < this.firstLive;
  }

  /**
   * Hands over the outcome with this ordinal: now (returns null) if it is its turn and the gate is
   * open, else a promise that resolves at its turn.
   */
  deliver(ordinal: number | null): Promise<void> | null {
    if (ordinal === null || this.closed) return null; // a row from before ordinals: no order to keep
    if (this.gateOpen() && this.expected[this.head] === ordinal) {
      this.handOver();
      return null;
    }
    return new Promise<void>((resolve) => {
      (this.arrived ??= new Map()).set(ordinal, resolve);
      this.pump();
    });
  }

  /** Stops keeping order (the run stopped): nothing more is handed over. */
  close(): void {
    this.closed = true;
    if (this.stallTimer !== undefined) clearTimeout(this.stallTimer);
  }

  /**
   * Keeps order again after `close`: a parked run continues warm (run/lifecycle.ts `wake`). It was
   * closed with nothing waiting for its turn (a run unloads only then), so it goes on where it was.
   */
  reopen(): void {
    this.closed = false;
    this.stalledAt = -1;
  }

  private gateOpen(): boolean {
    return turns.now() !== this.lastTurn;
  }

  private handOver(): void {
    this.head++;
    if (this.head > 1024 && this.head * 2 > this.expected.length) {
      this.expected.splice(0, this.head);
      this.head = 0;
    }
    this.lastTurn = turns.now();
    turns.after(this);
  }

  /** Called by `turns` once the turn of the last hand-over is over. */
  pump(): void {
    if (this.closed || !this.gateOpen()) return;
    const next = this.expected[this.head];
    if (next === undefined) return;
    const resolve = this.arrived?.get(next);
    if (resolve !== undefined) {
      this.arrived!.delete(next);
      this.handOver();
      resolve();
      return;
    }
    if (next < this.firstLive) this.watchStall(next);
  }

  /** A recorded outcome's operation has not been called: wait a while, then report it. */
  private watchStall(ordinal: number): void {
    if (this.stalledAt === ordinal) return;
    this.stalledAt = ordinal;
    if (this.stallTimer !== undefined) clearTimeout(this.stallTimer);
    this.stallTimer = setTimeout(() => {
      this.stallTimer = undefined;
      if (!this.closed && this.expected[this.head] === ordinal && this.arrived?.has(ordinal) !== true) this.onStall(ordinal);
    }, this.stallMs);
    this.stallTimer.unref();
  }
}

/**
 * Turns of the event loop, counted by one `setImmediate` shared by every run in the process: a
 * turn ends once the microtasks of everything that ran in it have drained. A hand-over waits for
 * the turn of the previous one to end; with one shared timer a hundred runs stepping together cost
 * one `setImmediate` per turn, not one per step.
 */
const turns = {
  count: 0,
  scheduled: false,
  waiting: new Set<CompletionOrder>(),
  now(): number {
    return this.count;
  },
  /** Pumps `order` once the current turn is over. */
  after(order: CompletionOrder): void {
    this.waiting.add(order);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.count++;
      this.scheduled = false;
      const ready = [...this.waiting];
      this.waiting.clear();
      for (const waiting of ready) waiting.pump();
    });
  },
};
