import type { Pool, PoolClient } from "pg";
import { classifyStoreError } from "../store-errors.js";
import { Mutex } from "../mutex.js";

/**
 * A pooled connection held for the store's lifetime, for work done one statement at a time: the
 * group commit's flushes, and the layers' writing statements (the scheduler's dispatch function).
 * Held, it saves the pool checkout on every use, and its session keeps what it has prepared and
 * planned: a PL/pgSQL function is compiled, and its statements planned, once per session — on
 * whichever of ten pooled connections a call landed, the dispatch function paid that (5–15 ms)
 * again and again. Uses take turns. A connection that fails is dropped, and the next use takes a
 * new one.
 */
export class HeldClient {
  private client: PoolClient | null = null;
  private readonly turns = new Mutex();

  constructor(private readonly pool: Pool) {}

  use<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    return this.turns.run(async () => {
      if (this.client === null) {
        const client = await this.pool.connect();
        // A connection whose socket breaks while idle is released to the pool as broken (which
        // destroys it and frees its slot) — merely forgetting it would leak one pool slot each time.
        client.on("error", (error) => {
          if (this.client === client) this.release(error);
        });
        this.client = client;
      }
      const client = this.client;
      try {
        return await fn(client);
      } catch (error) {
        // A statement's own error (constraint, data) leaves the connection usable. Anything else —
        // no SQLSTATE, or a connection/shutdown SQLSTATE such as 57P01 from pg_terminate_backend —
        // means the session is gone or going, or holds a statement gone stale (store-errors.ts):
        // destroy it; the next use checks out a new one.
        const kind = classifyStoreError(error);
        const statementError = kind.code !== undefined && !kind.transient;
        if (!statementError && this.client === client) this.release(error instanceof Error ? error : new Error(String(error)));
        throw error;
      }
    });
  }

  /** Gives the connection back to the pool: healthy (shutdown), or broken so the pool destroys it. */
  release(broken?: Error): void {
    const client = this.client;
    if (client === null) return;
    this.client = null;
    client.release(broken);
  }
}
