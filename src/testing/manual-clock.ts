import type { Clock } from "../engine/clock.js";

interface Sleeper {
  until: number;
  resolve: () => void;
}

/**
 * A clock that moves only when told to. Pass it as `new Cairn({ clock })`; `advance(ms)` fires
 * every durable timer that falls due (sleeps, receive timeouts, deadlines, backoff) without any
 * real waiting.
 */
export class ManualClock implements Clock {
  private current: number;
  private sleepers: Sleeper[] = [];
  private readonly listeners = new Set<() => void>();

  constructor(start: number | Date = Date.UTC(2026, 0, 1)) {
    this.current = typeof start === "number" ? start : start.getTime();
  }

  now(): number {
    return this.current;
  }

  sleep(delayMs: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      if (delayMs <= 0) return resolve();
      const sleeper: Sleeper = { until: this.current + delayMs, resolve };
      this.sleepers.push(sleeper);
      signal?.addEventListener(
        "abort",
        () => {
          this.sleepers = this.sleepers.filter((s) => s !== sleeper);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  onAdvance(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Moves time forward and wakes everything that fell due. */
  advance(deltaMs: number): void {
    this.set(this.current + deltaMs);
  }

  set(time: number | Date): void {
    const next = typeof time === "number" ? time : time.getTime();
    if (next < this.current) throw new RangeError("a ManualClock never goes backwards");
    this.current = next;
    const due = this.sleepers.filter((s) => s.until <= next);
    this.sleepers = this.sleepers.filter((s) => s.until > next);
    for (const sleeper of due) sleeper.resolve();
    for (const listener of this.listeners) listener();
  }
}
