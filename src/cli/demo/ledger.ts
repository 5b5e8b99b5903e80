import { randomBytes } from "node:crypto";
import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/**
 * The demo's outside world, as two append-only files the demo reads back to count what really
 * happened — the workflow's journal is not trusted to report on itself.
 *
 * `effects.log`: one line per execution of a step body (`time TAB step TAB worker TAB detail`).
 * `payments.log`: the payment provider's charges (`key TAB chargeId TAB amountCents`). Like a real
 * provider (Stripe's Idempotency-Key), it deduplicates by key: a second charge with a key it has
 * seen returns the first charge and charges nothing.
 */
export class DemoLedger {
  readonly effectsPath: string;
  readonly paymentsPath: string;

  constructor(directory: string) {
    this.effectsPath = join(directory, "effects.log");
    this.paymentsPath = join(directory, "payments.log");
  }

  recordEffect(step: string, worker: string, detail: string): void {
    appendFileSync(this.effectsPath, `${new Date().toISOString()}\t${step}\t${worker}\t${detail}\n`);
  }

  /** Charges once per idempotency key. */
  charge(idempotencyKey: string, amountCents: number): { chargeId: string; deduplicated: boolean } {
    const existing = this.charges().find((c) => c.key === idempotencyKey);
    if (existing !== undefined) return { chargeId: existing.chargeId, deduplicated: true };
    const chargeId = `ch_${randomBytes(4).toString("hex")}`;
    appendFileSync(this.paymentsPath, `${idempotencyKey}\t${chargeId}\t${amountCents}\n`);
    return { chargeId, deduplicated: false };
  }

  /** How many times each step body ran. */
  executions(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const line of readLines(this.effectsPath)) {
      const step = line.split("\t")[1] ?? "?";
      counts.set(step, (counts.get(step) ?? 0) + 1);
    }
    return counts;
  }

  charges(): { key: string; chargeId: string; amountCents: number }[] {
    return readLines(this.paymentsPath).map((line) => {
      const [key = "", chargeId = "", amount = "0"] = line.split("\t");
      return { key, chargeId, amountCents: Number(amount) };
    });
  }
}

function readLines(path: string): string[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8").split("\n").filter((line) => line !== "");
}
