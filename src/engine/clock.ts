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
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, Math.max(0, delayMs));
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
  onAdvance: () => () => undefined,
};
