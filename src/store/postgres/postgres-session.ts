import pg from "pg";
import { WAKE_CHANNEL } from "./postgres-writes.js";

interface Connected {
  client: pg.Client;
  pid: number;
}

/**
 * One dedicated connection a store keeps for its lifetime, outside the pool. It is the executor's
 * liveness: its backend pid goes into the executor's row, and when the process dies (`kill -9`
 * included) the kernel closes the socket, the server ends the session, and other executors see the
 * pid vanish from `pg_stat_activity` at once — no lease has to lapse. It also LISTENs on
 * `cairn_wake`.
 *
 * Opened on first use (a CLI that only reads never opens it). Once lost — the server restarted,
 * the network dropped — it is not reopened: other executors already count this one as dead, so a
 * new pid would only hide that; `pid()` answers null and the wake listeners are called once so
 * the engine polls.
 */
export class PostgresSession {
  private connected: Promise<Connected> | null = null;
  private lost = false;
  private closing = false;
  private readonly listeners = new Set<() => void>();

  constructor(
    private readonly url: string,
    private readonly types: pg.CustomTypesConfig,
  ) {}

  async pid(): Promise<number | null> {
    const session = await this.open();
    return this.lost ? null : session.pid;
  }

  /** Listening starts with the session; `await pid()` first to be sure no wake-up is missed. */
  onWake(listener: () => void): void {
    this.listeners.add(listener);
    this.open().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closing = true;
    const session = await this.connected?.catch(() => null);
    this.connected = null;
    await session?.client.end().catch(() => undefined);
  }

  private open(): Promise<Connected> {
    this.connected ??= this.connect().catch((error: unknown) => {
      this.connected = null;
      throw error;
    });
    return this.connected;
  }

  private async connect(): Promise<Connected> {
    const client = new pg.Client({
      connectionString: this.url,
      types: this.types,
      keepAlive: true,
      // The server notices a vanished machine (not only a killed process) within about 25 s.
      options: "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3",
    });
    const lost = (): void => {
      if (this.lost || this.closing) return;
      this.lost = true;
      this.wake();
    };
    client.on("error", lost);
    client.on("end", lost);
    client.on("notification", (message) => {
      if (message.channel === WAKE_CHANNEL) this.wake();
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${WAKE_CHANNEL}`);
      const result = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      return { client, pid: result.rows[0]!.pid };
    } catch (error) {
      client.removeListener("end", lost);
      client.removeListener("error", lost);
      client.on("error", () => undefined);
      await client.end().catch(() => undefined);
      throw error;
    }
  }

  private wake(): void {
    for (const listener of this.listeners) listener();
  }
}
