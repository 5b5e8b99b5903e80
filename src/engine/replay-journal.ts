import { AsyncLocalStorage } from "node:async_hooks";
import type { StepKind, StepRow } from "../store/store.js";

/**
 * Where a durable operation is called from. The workflow function runs in its run's top scope; the
 * function of a step (a tool's `execute`, a model call) runs in a scope of its own, so the operations
 * it calls are journaled inside it, whatever else the run does meanwhile. Node's AsyncLocalStorage
 * carries the scope through every `await`.
 */
export interface OperationScope {
  /** The run execution the scope belongs to: another run's scope is never this run's. */
  readonly owner: object;
  /** The enclosing operation's identity; "" at the workflow's top. */
  readonly identity: string;
  /** The enclosing operation's idempotency key; the run id at the top. */
  readonly key: string;
  /** How many operations of each kind, name and fingerprint this scope has called so far. */
  readonly calls: Map<string, number>;
  /** Set where durable operations cannot be journaled (inside ctx.transaction): why. */
  readonly refuse?: string;
}

export const operationScopes = new AsyncLocalStorage<OperationScope>();

export function topScope(owner: object, runId: string): OperationScope {
  return { owner, identity: "", key: runId, calls: new Map() };
}

/**
 * An operation's identity: its scope, kind, name and fingerprint, and how many operations with
 * the same four the scope called before it. It does not depend on what other branches do or when,
 * so concurrent branches cannot take each other's records; only operations that are alike in all
 * four (the same step name called from two branches) depend on the order of calls, which replay
 * reproduces (CompletionOrder) and fingerprints guard.
 */
export function operationBase(scope: string, kind: StepKind, name: string, fingerprint: string | null | undefined): string {
  return `${scope}|${kind}:${encodeURIComponent(name)}:${fingerprint == null ? "" : encodeURIComponent(fingerprint)}`;
}

/** The family of an identity: scope, kind and name (what a fingerprint divergence shares). */
function family(scope: string, kind: StepKind, name: string): string {
  return `${scope}|${kind}:${encodeURIComponent(name)}`;
}

/**
 * The stored form of an identity (the `path` column): the scope and the occurrence, since kind, name
 * and fingerprint are columns of their own. Null — most rows — for a top-level first occurrence.
 */
export function storedPath(scope: string, occurrence: number): string | null {
  return scope === "" && occurrence === 0 ? null : `${scope}#${occurrence}`;
}

interface Indexed {
  row: StepRow;
  /** Whether replay will ask for it (not inside a recorded operation): counted as uncalled until then. */
  counted: boolean;
  /** Whether replay asked for it (a counted row is uncalled until then). */
  called: boolean;
  identity: string;
  scope: string;
  family: string;
}

/**
 * A loaded run's journal, indexed for replay: rows by identity, the seqs in use, the completion
 * ordinals replay will hand over again (see CompletionOrder), and which recorded operations the
 * workflow has not called again yet. One is made per loaded run, so what only some runs use (the
 * seqs in use, clearance waiters) is made on first use.
 */
export class ReplayJournal {
  private readonly byIdentity = new Map<string, Indexed>();
  /** The seqs in use, made by the first `newSeq` of a run with a journal. */
  private seqs: Set<number> | undefined;
  private nextFreeSeq = 0;
  /** Recorded operations per family that replay has not asked for yet. */
  private readonly uncalled = new Map<string, number>();
  /** Recorded operations per scope that replay has not asked for yet. */
  private readonly uncalledInScope = new Map<string, number>();
  private uncalledTotal = 0;
  private waiters: Map<string, (() => void)[]> | undefined;
  /** Ordinals of recorded outcomes the workflow will see again, and the highest ordinal of all. */
  readonly replayOrdinals: number[] = [];
  readonly highestOrdinal: number = -1;
  private readonly rows: Indexed[] = [];
  /** A run with no journal yet (most live runs): nothing to look up. */
  readonly empty: boolean;

  constructor(rows: readonly StepRow[]) {
    this.empty = rows.length === 0;
    let highest = -1;
    const legacyCounts = new Map<string, number>();
    for (const row of rows) {
      if (row.completion !== null) highest = Math.max(highest, row.completion);
      let scope = "";
      let occurrence: number;
      if (row.storedPath === null) {
        // A top-level first occurrence, or a row from before identities: count like ones in seq order.
        const base = operationBase("", row.kind, row.name, row.fingerprint);
        occurrence = legacyCounts.get(base) ?? 0;
        legacyCounts.set(base, occurrence + 1);
      } else {
        const hash = row.storedPath.lastIndexOf("#");
        scope = row.storedPath.slice(0, hash);
        occurrence = Number(row.storedPath.slice(hash + 1));
      }
      const identity = `${operationBase(scope, row.kind, row.name, row.fingerprint)}#${occurrence}`;
      const indexed = { row, identity, scope, family: family(scope, row.kind, row.name), counted: false, called: false };
      this.byIdentity.set(identity, indexed);
      this.rows.push(indexed);
    }
    this.highestOrdinal = highest;
    for (const indexed of this.rows) {
      if (this.insideRecordedOperation(indexed.scope)) continue;
      indexed.counted = true;
      this.uncalled.set(indexed.family, (this.uncalled.get(indexed.family) ?? 0) + 1);
      this.uncalledInScope.set(indexed.scope, (this.uncalledInScope.get(indexed.scope) ?? 0) + 1);
      this.uncalledTotal++;
      if (indexed.row.completion !== null && indexed.row.status !== "pending") this.replayOrdinals.push(indexed.row.completion);
    }
  }

  /**
   * The record for the operation with this identity, if any (and marks it called). A row written
   * before fingerprints existed answers for a call that has one.
   */
  take(scope: string, kind: StepKind, name: string, fingerprint: string | undefined, occurrence: number): StepRow | undefined {
    let found = this.byIdentity.get(`${operationBase(scope, kind, name, fingerprint)}#${occurrence}`);
    if (found === undefined && fingerprint !== undefined) {
      const legacy = this.byIdentity.get(`${operationBase(scope, kind, name, null)}#${occurrence}`);
      if (legacy !== undefined && legacy.row.fingerprint === null) found = legacy;
    }
    if (found === undefined) return undefined;
    if (found.counted && !found.called) {
      found.called = true;
      this.uncalledInScope.set(found.scope, (this.uncalledInScope.get(found.scope) ?? 1) - 1);
      this.uncalledTotal--;
      const left = (this.uncalled.get(found.family) ?? 1) - 1;
      this.uncalled.set(found.family, left);
      if (left === 0) for (const wake of this.waiters?.get(found.family)?.splice(0) ?? []) wake();
    }
    return found.row;
  }

  /** The record for an identity without marking it called (for a look ahead). */
  look(scope: string, kind: StepKind, name: string, fingerprint: string | undefined, occurrence: number): StepRow | undefined {
    return (
      this.byIdentity.get(`${operationBase(scope, kind, name, fingerprint)}#${occurrence}`)?.row ??
      (fingerprint === undefined ? undefined : this.byIdentity.get(`${operationBase(scope, kind, name, null)}#${occurrence}`)?.row)
    );
  }

  /**
   * Null if an operation without a record may go ahead now; else a promise that resolves once no
   * recorded operation of its family (scope, kind, name) is left uncalled. Until then the call may
   * be a divergence — the code asking a model with another prompt than the record's — and must not
   * reach the outside world: replay either calls the record's operation (and the call was only new
   * work, in flight at the crash), or stalls and reports the divergence.
   */
  clearance(scope: string, kind: StepKind, name: string): Promise<void> | null {
    const key = family(scope, kind, name);
    if ((this.uncalled.get(key) ?? 0) === 0) return null;
    return new Promise<void>((resolve) => {
      const waiters = (this.waiters ??= new Map());
      const list = waiters.get(key) ?? [];
      list.push(resolve);
      waiters.set(key, list);
    });
  }

  /**
   * Whether the scope has recorded operations replay has not asked for yet: the run went past this
   * point before (under the code of its journal), and is replaying.
   */
  replayingIn(scope: string): boolean {
    return (this.uncalledInScope.get(scope) ?? 0) > 0;
  }

  /** Whether any recorded operation is still to be asked for, in any scope. */
  replaying(): boolean {
    return this.uncalledTotal > 0;
  }

  /** The recorded row with this completion ordinal (for error messages). */
  byOrdinal(ordinal: number): StepRow | undefined {
    return this.rows.find((indexed) => indexed.row.completion === ordinal)?.row;
  }

  /**
   * A seq for an operation the journal does not have: the lowest not in use. For a run without
   * concurrency or nesting this is the seq the operation had before a crash, as it always was.
   */
  newSeq(): number {
    if (this.rows.length === 0) return this.nextFreeSeq++;
    const seqs = (this.seqs ??= new Set(this.rows.map((indexed) => indexed.row.seq)));
    while (seqs.has(this.nextFreeSeq)) this.nextFreeSeq++;
    return this.nextFreeSeq++;
  }

  /**
   * Whether a scope lies inside an operation that has itself been recorded: replay returns that
   * operation's record without running its function, so nothing in the scope is asked for again.
   */
  private insideRecordedOperation(scope: string): boolean {
    for (let at = scope; at !== ""; at = at.slice(0, Math.max(0, at.lastIndexOf("|")))) {
      const enclosing = this.byIdentity.get(at);
      if (enclosing !== undefined && enclosing.row.status !== "pending") return true;
    }
    return false;
  }
}
