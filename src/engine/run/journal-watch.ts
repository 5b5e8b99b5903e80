import type { StepKind, StepRecord, StepRow, WriteOp } from "../../store/store.js";

/** A journal row as a warm continuation expects to find it: its status and completion, or absent. */
export interface ExpectedRow {
  seq: number;
  /** null: no row at this seq. */
  status: string | null;
  completion: number | null;
}

/** What a parked execution checks against the database before it continues (see warm-runs.ts). */
export interface JournalExpectation {
  /** The highest seq the execution took: no row may lie above it. */
  top: number;
  rows: ExpectedRow[];
}

/**
 * Past this many rows to compare, a parked run is replayed instead: the check must stay a handful
 * of index lookups, whatever the journal's length.
 */
const MAX_WATCHED_ROWS = 64;

/**
 * What a loaded run knows of the journal rows that can still change under it — the rows a warm
 * continuation (warm-runs.ts) compares with the database before it trusts its memory.
 *
 * A run's journal changes only by (1) an execution of the run — which writes new rows (above the
 * highest seq taken here, or at a seq taken here that has no row: a child's result, an operation
 * that threw before its record) or completes a row that waits (a sleep's start, a pending receive or
 * select) — and (2) `resume`, which deletes the failed rows after the last success. Every other row
 * is final. So memory and database agree when: nothing lies above `top`, the seqs without a row
 * still have none, and the waiting rows and the failed rows a resume could delete are as known.
 *
 * What is tracked errs on one side only: a write this class does not hear of leaves its seq
 * counted as rowless (or a wait as open), which the database then contradicts — the run is
 * replayed, never continued on a wrong belief.
 */
export class JournalWatch {
  top = -1;
  /** Seqs taken without a row (made by the first: one is kept per loaded run, most have none). */
  private rowless: Set<number> | undefined;
  /** Rows a wake-up changes: a sleep's start (no completion yet), a pending receive or select. */
  private open: Map<number, ExpectedRow> | undefined;
  /** Failed rows, for the ones a resume would delete. */
  private readonly failed: { row: ExpectedRow; finishedAt: number }[] = [];
  private lastSucceededSeq = -1;
  private lastSucceededAt = -Infinity;

  constructor(rows: readonly StepRow[]) {
    for (const row of rows) this.noted(row.seq, row.kind, row.status, row.completion, row.finishedAt);
  }

  /** An operation took `seq` (a new one when the journal has no row for it). */
  taken(seq: number, recorded: boolean): void {
    if (seq > this.top) this.top = seq;
    if (!recorded) (this.rowless ??= new Set()).add(seq);
  }

  /** A step record reached the database. */
  step(step: StepRecord): void {
    this.noted(step.seq, step.kind, step.status, step.completion ?? null, step.finishedAt);
  }

  /** Ops that reached the database under the run's fence (JournalCore.write). */
  wrote(ops: readonly WriteOp[]): void {
    for (const op of ops) {
      if (op.type === "step") this.step(op.step);
      else if (op.type === "completion") this.open?.delete(op.seq);
    }
  }

  /** The rows to compare, or null when there are too many (the run is replayed). */
  expectation(): JournalExpectation | null {
    const rows: ExpectedRow[] = [...(this.open?.values() ?? [])];
    for (const seq of this.rowless ?? []) rows.push({ seq, status: null, completion: null });
    for (const failed of this.failed) {
      // Exactly what `resume` deletes (statements.ts, resumeSteps): failures after the last success.
      if (failed.row.seq > this.lastSucceededSeq || failed.finishedAt >= this.lastSucceededAt) rows.push(failed.row);
    }
    return rows.length > MAX_WATCHED_ROWS ? null : { top: this.top, rows };
  }

  /** A row the store wrote for an operation here (a receive, a select) reached the database. */
  noted(seq: number, kind: StepKind, status: string, completion: number | null, finishedAt: number | null): void {
    if (seq > this.top) this.top = seq;
    this.rowless?.delete(seq);
    if (status === "pending" || (kind === "sleep" && completion === null)) (this.open ??= new Map()).set(seq, { seq, status, completion });
    else this.open?.delete(seq);
    if (status === "failed") {
      this.failed.push({ row: { seq, status, completion }, finishedAt: finishedAt ?? -Infinity });
    } else if (status === "succeeded") {
      if (seq > this.lastSucceededSeq) this.lastSucceededSeq = seq;
      if (finishedAt !== null && finishedAt > this.lastSucceededAt) this.lastSucceededAt = finishedAt;
    }
  }
}
