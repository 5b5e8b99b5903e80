import type { PendingApproval } from "../../ai/index.js";
import { print, truncate } from "../output.js";
import { cyan, dim, red } from "../style.js";
import type { TrajectoryEntry } from "./journal-watch.js";
import type { Marker } from "./markers.js";
import { REFUND_RESPONSE_DELAY_MS } from "./support-agent.js";

/**
 * Tells the demo as it happens, each line stamped with the time since the start, in three columns:
 * who (a worker, or the approver in the demo's process), which ticket, what. Model and tool calls
 * are told when the journal has recorded them; refunds when the payment service has made them.
 */
export class Narrator {
  private readonly started = Date.now();
  /** The worker alive now: whoever committed what the journal shows next. */
  worker = 0;

  constructor(
    private readonly quiet: boolean,
    /** The width of the ticket column: the longest run id. */
    private readonly ticketWidth: number,
  ) {}

  get elapsedMs(): number {
    return Date.now() - this.started;
  }

  /** `atMs`: when it happened, if that was earlier (a kill, told once its effects were checked). */
  say(text: string, atMs = this.elapsedMs): void {
    if (!this.quiet) print(`${dim(`[${(atMs / 1000).toFixed(2).padStart(5)}s]`)} ${text}`);
  }

  entry(entry: TrajectoryEntry): void {
    const detail = entry.detail ?? "";
    const what =
      entry.kind === "tool"
        ? `${entry.name} → ${truncate(detail, 80)}`
        : /^\[.*\]$/s.test(detail)
          ? `model asks for ${truncate(detail.slice(1, -1), 70)}`
          : `model answers "${truncate(detail, 70)}"`;
    this.line(`worker #${this.worker}`, entry.runId, `${what} ${dim(`(seq ${entry.seq})`)}`);
  }

  marker(marker: Marker, worker: number): void {
    const who = `worker #${worker}`;
    switch (marker.event) {
      case "refund":
        return this.line(
          who,
          marker.runId,
          marker.deduplicated
            ? `refund runs again, same key ${marker.idempotencyKey}: the payment service returns ${marker.refundId} and moves no money`
            : `the payment service refunds ${euros(marker.amountCents)} as ${marker.refundId} (key ${marker.idempotencyKey}); ` +
                `its answer takes ${REFUND_RESPONSE_DELAY_MS} ms…`,
        );
      case "error":
        return this.line(who, "", red(`error: ${marker.message}`));
      case "model-error":
        return this.line(who, "", red(`a model request failed (Cairn retries it): ${truncate(marker.message, 100)}`));
      case "model-request":
      case "done":
        return;
    }
  }

  approved(approval: PendingApproval, waitedMs: number): void {
    this.line(
      "approver",
      approval.runId,
      `approves ${approval.toolName}(${truncate(JSON.stringify(approval.input), 60)}) from pid ${process.pid}, ` +
        `${(waitedMs / 1000).toFixed(2)} s after it was requested`,
    );
  }

  private line(who: string, ticket: string, what: string): void {
    this.say(`  ${cyan(who.padEnd(9))}  ${ticket.padEnd(this.ticketWidth)}  ${what}`);
  }
}

export function euros(cents: number): string {
  return `€${(cents / 100).toFixed(2)}`;
}
