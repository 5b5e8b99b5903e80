import type { StepRow } from "../../store/store.js";
import { fromStored } from "../../store/value/index.js";

/** A time that passed, and the seq of the operation waiting on it. */
interface Due {
  dueAt: number;
  seq: number;
}

const byDue = (a: Due, b: Due): number => a.dueAt - b.dueAt || a.seq - b.seq;

/**
 * Times that passed while a run was away end in the order they fell due — a sleep's end, a select's
 * timer, a receive's timeout — not in the order the code reaches them.
 *
 * A run woken late, or recovered after a crash, finds several sleeps, select timers and receive
 * timeouts past their time at once. The code reaches them in an order set by promise chains (one
 * waited for a sleep's end riding with the run to land, another for the same commit through another
 * chain) and by turns (a wait called only after two recorded outcomes were handed over comes two
 * turns later): a replay then ended a later time first, and a race two sleeps had won went to a
 * select (the fuzzer's FUZZ_SEED=218008016). An end the workflow saw beside other waits is in the
 * journal before it sees it (timers.ts), so this order only decides ends no one has seen yet — the
 * same way live and on replay.
 *
 * So an operation whose time has passed waits here before it takes its completion ordinal: for the
 * end of the turn, and for every wait recorded in the journal it was loaded from (a time recorded,
 * its end not) whose time came before its own and which has not gone on yet. They go on in (time,
 * seq) order, live and on replay alike. A recorded wait the code never reaches again (it changed
 * under the run) holds the others back for at most `stallMs`, after which they go on in order.
 */
export class DueOrder {
  /** The journal's top-level waits with a recorded time and no recorded end, in due order. */
  private readonly recorded: Due[];
  /**
   * Seqs that went on (or gave up waiting): a recorded one among them holds nothing back. Kept
   * only when there are recorded waits to hold anything back (most live runs have none).
   */
  private readonly gone: Set<number> | null;
  private waiting: (Due & { go: () => void })[] = [];
  private scheduled = false;
  private stallTimer: NodeJS.Timeout | undefined;

  constructor(
    journal: readonly StepRow[],
    private readonly stallMs: number,
  ) {
    this.recorded = journal.flatMap((row) => {
      const dueAt = recordedWait(row);
      return dueAt === null ? [] : [{ dueAt, seq: row.seq }];
    });
    this.recorded.sort(byDue);
    this.gone = this.recorded.length === 0 ? null : new Set();
  }

  /**
   * For a run that does nothing else: true (and the operation at `seq` counts as gone on) when no
   * recorded wait whose time came first is still to go on — nothing to wait for, not even the turn.
   */
  passAlone(dueAt: number, seq: number): boolean {
    if (this.heldBack({ dueAt, seq })) return false;
    this.gone?.add(seq);
    return true;
  }

  /** Resolves when the operation at `seq`, whose time `dueAt` has passed, may take its ordinal. */
  wait(dueAt: number, seq: number): Promise<void> {
    return new Promise((resolve) => {
      this.waiting.push({ dueAt, seq, go: resolve });
      if (this.scheduled) return;
      this.scheduled = true;
      endOfTurn.add(this);
    });
  }

  /**
   * At the end of the turn: lets go, in due order, each wait that no earlier recorded wait still
   * holds back. Resolved in that order, the callers' continuations take their ordinals in it.
   */
  release(force = false): void {
    this.scheduled = false;
    const held: (Due & { go: () => void })[] = [];
    for (const waiting of this.waiting.sort(byDue)) {
      if (!force && this.heldBack(waiting)) {
        held.push(waiting);
        continue;
      }
      this.gone?.add(waiting.seq);
      waiting.go();
    }
    this.waiting = held;
    if (held.length === 0) {
      if (this.stallTimer !== undefined) clearTimeout(this.stallTimer);
      this.stallTimer = undefined;
    } else if (this.stallTimer === undefined) {
      this.stallTimer = setTimeout(() => {
        this.stallTimer = undefined;
        this.release(true);
      }, this.stallMs);
      this.stallTimer.unref();
    }
  }

  /** Whether a recorded wait whose time came first has not gone on yet. */
  private heldBack(waiting: Due): boolean {
    for (const recorded of this.recorded) {
      if (byDue(recorded, waiting) >= 0) return false;
      if (!this.gone!.has(recorded.seq)) return true;
    }
    return false;
  }
}

/**
 * The time of a top-level wait the row recorded without its end: a sleep's wake-up time (a sleep
 * row without a completion), a pending select's earliest timer, a pending receive's deadline.
 * Null for anything else — and inside a step's function, where waits happen in memory.
 */
function recordedWait(row: StepRow): number | null {
  if (row.output === null || (row.storedPath !== null && !row.storedPath.startsWith("#"))) return null;
  let time: unknown = null;
  if (row.kind === "sleep" && row.completion === null) time = fromStored(row.output);
  else if (row.kind === "select" && row.status === "pending") {
    const deadlines = Object.values(fromStored(row.output) as Record<string, number>);
    time = deadlines.length === 0 ? null : Math.min(...deadlines);
  } else if (row.kind === "recv" && row.status === "pending") time = JSON.parse(row.output);
  return typeof time === "number" && Number.isFinite(time) ? time : null;
}

/**
 * The runs with operations waiting in `DueOrder.wait`, released at the end of the turn by one
 * `setImmediate` shared by every run in the process (10,000 runs waking at once cost one, not
 * 10,000). Order matters only within a run: each releases its own in due order.
 */
const endOfTurn = {
  orders: new Set<DueOrder>(),
  add(order: DueOrder): void {
    if (this.orders.size === 0) setImmediate(() => this.release());
    this.orders.add(order);
  },
  release(): void {
    const orders = [...this.orders];
    this.orders.clear();
    for (const order of orders) order.release();
  },
};
