/**
 * What a demo worker tells the demo, one JSON line each on stdout, prefixed so that anything else
 * a worker prints is told apart. Stdout is a pipe, and pipes are written synchronously on Linux and
 * macOS, so a marker written before a SIGKILL has reached the demo.
 */
import { markerChannel } from "../../util/line-markers.js";

export type Marker =
  /** The payment service answered the refund tool; the tool's result is not checkpointed yet. */
  | {
      event: "refund";
      runId: string;
      orderId: string;
      amountCents: number;
      refundId: string;
      idempotencyKey: string;
      deduplicated: boolean;
    }
  /** The worker sent a request to the model (a recorded call replayed from the journal sends none). */
  | { event: "model-request" }
  /** A model request failed (an HTTP error, a timeout); Cairn retries it, as another request. */
  | { event: "model-error"; message: string }
  /** Every ticket's run ended; `failed` names those that did not succeed. */
  | { event: "done"; failed: { runId: string; message: string }[] }
  | { event: "error"; message: string };

const channel = markerChannel<Marker>("@cairn-demo ");

export const formatMarker = channel.format;
export const parseMarker = channel.parse;
