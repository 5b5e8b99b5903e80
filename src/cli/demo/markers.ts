/**
 * What a demo worker tells the demo, one JSON line each on stdout, prefixed so that anything else
 * a worker prints is told apart. The demo decides when to kill from these.
 */
export type Marker =
  /** A step body ran and did its side effect (reserve-stock, send-confirmation). */
  | { event: "effect"; step: string; detail: string }
  /** charge-card called the payment provider; its result is not checkpointed yet. */
  | { event: "charged"; chargeId: string; idempotencyKey: string; deduplicated: boolean; amountCents: number }
  /** A step's result came back to the workflow: checkpointed now, or replayed from the journal. */
  | { event: "returned"; step: string }
  /** The workflow reached its durable sleep (on every replay too). */
  | { event: "sleeping"; name: string; delayMs: number }
  | { event: "done"; output: unknown }
  | { event: "error"; message: string };

const PREFIX = "@cairn-demo ";

export function formatMarker(marker: Marker): string {
  return `${PREFIX}${JSON.stringify(marker)}`;
}

/** The marker on a line of worker output, or undefined for any other line. */
export function parseMarker(line: string): Marker | undefined {
  if (!line.startsWith(PREFIX)) return undefined;
  try {
    return JSON.parse(line.slice(PREFIX.length)) as Marker;
  } catch {
    return undefined;
  }
}
