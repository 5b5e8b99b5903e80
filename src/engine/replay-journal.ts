import { AsyncLocalStorage } from "node:async_hooks";
import type { StepRow } from "../store/store.js";

/**
 * Where a durable operation is called from. The workflow function runs in its run's top scope;
 * the function of a step (a tool's `execute`, a model call) runs in a scope of its own, so the
 * operations it calls are numbered inside it — `"7.0"`, `"7.1"` inside operation `"7"` — whatever
 * else the run does meanwhile. Node's AsyncLocalStorage carries the scope through every `await`.
 */
export interface OperationScope {
  /** The run execution the scope belongs to: another run's scope is never this run's. */
  readonly owner: object;
  /** The enclosing operation's path; null at the workflow's top. */
  readonly path: string | null;
  /** The next position in this scope. */
  next: number;
  /** Set where durable operations cannot be journaled (inside ctx.transaction): why. */
  readonly refuse?: string;
}

export const operationScopes = new AsyncLocalStorage<OperationScope>();

export function pathAt(scope: OperationScope, position: number): string {
  return scope.path === null ? String(position) : `${scope.path}.${position}`;
}

/**
 * A loaded run's journal, indexed for replay: rows by path, the seqs in use, and the completion
 * ordinals replay will hand over again (see CompletionOrder).
 */
export class ReplayJournal {
  private readonly byPath = new Map<string, StepRow>();
  private readonly bySeq = new Map<number, StepRow>();
  private nextFreeSeq = 0;
  /** Ordinals of recorded outcomes the workflow will see again, and the highest ordinal of all. */
  readonly replayOrdinals: number[] = [];
  readonly highestOrdinal: number = -1;

  constructor(rows: readonly StepRow[]) {
    let highest = -1;
    for (const row of rows) {
      this.byPath.set(row.path, row);
      this.bySeq.set(row.seq, row);
      if (row.completion !== null) highest = Math.max(highest, row.completion);
    }
    this.highestOrdinal = highest;
    for (const row of rows) {
      if (row.completion !== null && row.status !== "pending" && !this.insideRecordedOperation(row.path)) {
        this.replayOrdinals.push(row.completion);
      }
    }
  }

  find(path: string): StepRow | undefined {
    return this.byPath.get(path);
  }

  /** The recorded row with this completion ordinal (for error messages). */
  byOrdinal(ordinal: number): StepRow | undefined {
    for (const row of this.bySeq.values()) if (row.completion === ordinal) return row;
    return undefined;
  }

  /**
   * A seq for an operation the journal does not have: the lowest not in use. For a run without
   * nesting this is the seq the operation had before a crash, as it always was.
   */
  newSeq(): number {
    while (this.bySeq.has(this.nextFreeSeq)) this.nextFreeSeq++;
    return this.nextFreeSeq++;
  }

  /**
   * Whether a row was written inside an operation that has itself been recorded: replay returns
   * the enclosing operation's record without running its function, so this row is never asked for.
   */
  private insideRecordedOperation(path: string): boolean {
    for (let dot = path.indexOf("."); dot >= 0; dot = path.indexOf(".", dot + 1)) {
      const enclosing = this.byPath.get(path.slice(0, dot));
      if (enclosing !== undefined && enclosing.status !== "pending") return true;
    }
    return false;
  }
}
