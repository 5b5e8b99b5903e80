import { setLongTimeout } from "./long-timeout.js";

/**
 * Where Cairn reads the time. Every durable timer (sleeps, receive deadlines, run deadlines, step
 * timeouts and retry backoff) goes through a Clock, so tests can control time instead of sleeping
 * (see `ManualClock` in `cairn/testing`).
 */
export interface Clock {
  now(): number;
  /** Resolves after `delayMs` of this clock's time, or rejects with the signal's reason. */
  sleep(delayMs: number, signal?: AbortSignal): Promise<void>;
  /** Calls `listener` whenever time jumps (a manual clock advanced); returns an unsubscribe. */
  onAdvance(listener: () => void): () => void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep(delayMs, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      // Chunked: a plain setTimeout of more than ~24.8 days would fire at once.
      const timer = setLongTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, delayMs);
      const onAbort = () => {
        timer.clear();
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
  onAdvance: () => () => undefined,
};
