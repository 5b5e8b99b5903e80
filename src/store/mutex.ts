/** A FIFO async lock: one holder at a time, waiters served in arrival order. */
export class Mutex {
  private held = false;
  private readonly waiters: (() => void)[] = [];

  get locked(): boolean {
    return this.held;
  }

  /** Takes the lock if it is free, at once: true if it was taken. */
  tryAcquire(): boolean {
    if (this.held) return false;
    this.held = true;
    return true;
  }

  async acquire(): Promise<void> {
    if (!this.held) {
      this.held = true;
      return;
    }
    await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    const next = this.waiters.shift();
    if (next === undefined) this.held = false;
    else next();
  }

  async run<T>(fn: () => Promise<T> | T): Promise<T> {
    // Free (the common case): no promise to wait on.
    if (!this.tryAcquire()) await this.acquire();
    try {
      return await fn();
    } finally {
      this.release();
    }
  }
}
