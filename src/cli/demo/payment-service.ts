import { randomBytes } from "node:crypto";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** One request the payment service received, as a line of its ledger. */
export interface LedgerEntry {
  /** ISO 8601. */
  at: string;
  idempotencyKey: string;
  orderId: string;
  amountCents: number;
  refundId: string;
  /** True when the key had been seen: the first refund was returned and no money moved. */
  deduplicated: boolean;
  /** The process that called: `worker #2 (pid 4242)`. */
  caller: string;
}

export interface RefundReceipt {
  refundId: string;
  deduplicated: boolean;
}

/**
 * The demo's payment service, in-process and file-backed: `payments.log` in the demo's directory,
 * one JSON line per request. The file outlives every SIGKILL, so the demo counts what really
 * happened from it instead of trusting the journal to report on itself.
 *
 * Like a real provider (Stripe's `Idempotency-Key`), it deduplicates by key: a refund with a key it
 * has seen returns the first refund and moves no money. Only one worker is alive at a time, and
 * within a process the read and the append run without an await between them, so two requests
 * with one key cannot both refund.
 */
export class PaymentService {
  readonly ledgerPath: string;

  constructor(
    directory: string,
    private readonly caller: string,
  ) {
    this.ledgerPath = join(directory, "payments.log");
  }

  refund(request: { idempotencyKey: string; orderId: string; amountCents: number }): RefundReceipt {
    const first = this.entries().find((e) => e.idempotencyKey === request.idempotencyKey && !e.deduplicated);
    const receipt =
      first === undefined ? { refundId: `rf_${randomBytes(4).toString("hex")}`, deduplicated: false } : { refundId: first.refundId, deduplicated: true };
    const entry: LedgerEntry = { at: new Date().toISOString(), ...request, ...receipt, caller: this.caller };
    appendFileSync(this.ledgerPath, `${JSON.stringify(entry)}\n`);
    return receipt;
  }

  /** Every request so far, oldest first. */
  entries(): LedgerEntry[] {
    if (!existsSync(this.ledgerPath)) return [];
    return readFileSync(this.ledgerPath, "utf8")
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as LedgerEntry);
  }
}
