/**
 * The mock services' ledger: one entry per request that reached a service, applied or
 * deduplicated. It is the experiment's ground truth for side effects — it lives in the supervisor,
 * outside every worker, so no runtime reports on itself.
 */

export type Service = "email" | "payments" | "tickets";

export interface LedgerEntry {
  /** 1, 2, ... in arrival order. */
  n: number;
  /** When the service acted (ms since the epoch). */
  at: number;
  service: Service;
  op: "send" | "charge" | "open" | "close";
  task: number;
  /**
   * The logical effect: what a correct run does exactly once. `charge:7` is task 7's charge,
   * `email:7:billing@example.com` its email to billing. Two applied entries with one effect are a
   * duplicate side effect.
   */
  effect: string;
  /** The caller's idempotency key, or null when it passed none. */
  idempotencyKey: string | null;
  /** True when the key had been seen: the first result was returned and nothing happened. */
  deduplicated: boolean;
  result: Record<string, unknown>;
}

/** Applied entries beyond the first per logical effect. */
export function duplicateEffects(ledger: readonly LedgerEntry[]): number {
  const applied = ledger.filter((e) => !e.deduplicated);
  return applied.length - new Set(applied.map((e) => e.effect)).size;
}

/** The tasks with at least one side effect applied twice. */
export function duplicatedEffectTasks(ledger: readonly LedgerEntry[]): number[] {
  const seen = new Set<string>();
  const tasks = new Set<number>();
  for (const entry of ledger) {
    if (entry.deduplicated) continue;
    if (seen.has(entry.effect)) tasks.add(entry.task);
    seen.add(entry.effect);
  }
  return [...tasks];
}

export function appliedEffects(ledger: readonly LedgerEntry[]): number {
  return ledger.filter((e) => !e.deduplicated).length;
}
