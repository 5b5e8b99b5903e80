import { CairnError } from "../errors.js";

/** Where a durable tool call hands its key to the tool's `execute` options. */
export const IDEMPOTENCY_KEY = Symbol.for("cairn.idempotencyKey");

/**
 * The stable key of this tool call: `runId:seq`, the same across crashes and retries. Pass it to
 * the external service so it can deduplicate a call that Cairn had to make again (a crash after the
 * service acted but before the result was recorded).
 */
export function idempotencyKey(options: unknown): string {
  const key = (options as { [IDEMPOTENCY_KEY]?: unknown } | undefined)?.[IDEMPOTENCY_KEY];
  if (typeof key !== "string") {
    throw new CairnError(
      "idempotencyKey(options) needs the options a Cairn agent passes to a tool's execute — call it inside a tool run by cairn.agent or ctx.tools",
    );
  }
  return key;
}
