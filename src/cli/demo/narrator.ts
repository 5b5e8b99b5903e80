import { formatDuration, print } from "../output.js";
import { cyan, dim, red } from "../style.js";
import type { Marker } from "./markers.js";

/**
 * Tells the demo as it happens, each line stamped with the time since the start. What a worker
 * did is told from its markers; a step it reports back without having run it was replayed.
 */
export class Narrator {
  private readonly started = Date.now();
  private readonly ranIn = new Map<number, Set<string>>();
  private sleptThrough = false;

  constructor(private readonly quiet: boolean) {}

  get elapsedMs(): number {
    return Date.now() - this.started;
  }

  say(text: string): void {
    if (!this.quiet) print(`${dim(`[${(this.elapsedMs / 1000).toFixed(2).padStart(5)}s]`)} ${text}`);
  }

  /** From now on, reaching the sleep again is a replay past its wake-up time. */
  killedWhileAsleep(): void {
    this.sleptThrough = true;
  }

  marker(marker: Marker, workerNumber: number): void {
    const ran = this.ranIn.get(workerNumber) ?? new Set<string>();
    this.ranIn.set(workerNumber, ran);
    const who = `  ${cyan(`worker #${workerNumber}`)}  `;
    switch (marker.event) {
      case "effect":
        ran.add(marker.step);
        return this.say(`${who}${marker.step}: ${marker.detail}`);
      case "charged":
        ran.add("charge-card");
        return this.say(
          marker.deduplicated
            ? `${who}charge-card: runs again, with the same key ${marker.idempotencyKey}; ` +
                `the provider returns charge ${marker.chargeId} and charges nothing`
            : `${who}charge-card: charged €${(marker.amountCents / 100).toFixed(2)} as ${marker.chargeId} ` +
                `(idempotency key ${marker.idempotencyKey}); awaiting the response…`,
        );
      case "returned":
        if (!ran.has(marker.step)) this.say(`${who}${marker.step}: replayed from the journal, not run again`);
        return;
      case "sleeping":
        return this.say(
          this.sleptThrough
            ? `${who}${marker.name}: replayed; its recorded wake-up time has passed`
            : `${who}${marker.name}: a durable sleep of ${formatDuration(marker.delayMs)} begins`,
        );
      case "error":
        return this.say(`${who}${red(`error: ${marker.message}`)}`);
      case "done":
        return;
    }
  }
}
