/**
 * Reads by key that are asked for in the same turn of the event loop share one statement: the
 * group commit's counterpart for reads. An executor loading the journals of the 1,000 runs one
 * claim gave it, or 500 concurrent `start()` calls reading their rows back, cost one round trip
 * instead of 1,000 (or 500) queued on the pool. A lone read waits one `setImmediate`.
 *
 * Each read still happens after it was asked for, so it sees everything committed before the call.
 * A failed statement fails every read it carried (each caller handles it as it would its own).
 */
export class ReadBatch<Value> {
  private waiting = new Map<string, { resolve: (value: Value) => void; reject: (error: unknown) => void }[]>();

  /** `fetch` reads the keys' values in one statement; a key it leaves out gets `missing(key)`. */
  constructor(
    private readonly fetch: (keys: string[]) => Promise<Map<string, Value>>,
    private readonly missing: () => Value,
    /** A value given to a second caller of the same key (arrays are copied: callers may keep them). */
    private readonly copy: (value: Value) => Value = (value) => value,
  ) {}

  load(key: string): Promise<Value> {
    return new Promise((resolve, reject) => {
      const callers = this.waiting.get(key);
      if (callers !== undefined) return callers.push({ resolve, reject });
      this.waiting.set(key, [{ resolve, reject }]);
      if (this.waiting.size === 1) setImmediate(() => void this.flush());
    });
  }

  private async flush(): Promise<void> {
    const batch = this.waiting;
    this.waiting = new Map();
    try {
      const values = await this.fetch([...batch.keys()]);
      for (const [key, callers] of batch) {
        const value = values.get(key) ?? this.missing();
        callers.forEach((caller, i) => caller.resolve(i === 0 ? value : this.copy(value)));
      }
    } catch (error) {
      for (const callers of batch.values()) for (const caller of callers) caller.reject(error);
    }
  }
}
