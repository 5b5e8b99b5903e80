import pg from "pg";
import { backoffMs } from "../transient.js";
import { WAKE_CHANNEL } from "./postgres-writes.js";

interface Connected {
  client: pg.Client;
  pid: number;
}

/** Turns `idle_session_timeout` off for this session, where the server has it (42704 elsewhere: ignored). */
const KEEP_WHILE_IDLE = `DO $$ BEGIN PERFORM set_config('idle_session_timeout', '0', false);
  EXCEPTION WHEN undefined_object THEN NULL; END $$`;

/**
 * The channel a session hears the wake-ups meant for it alone (`cairn_wake_<backend pid>`): a
 * dispatch that gives a run to one executor notifies that executor's session instead of every
 * executor's (the scheduler's `cairn_executor_queues.wake_channel`). A pid names one session at a
 * time; a session that reused a dead one's pid hears a wake-up naming an executor id not its own,
 * which its executor ignores (wake-payloads.ts).
 */
export function ownWakeChannel(pid: number): string {
  return `${WAKE_CHANNEL}_${pid}`;
}

/**
 * One dedicated connection a store keeps for its lifetime, outside the pool. It is the executor's
 * liveness: its backend pid goes into the executor's row, and when the process dies (`kill -9`
 * included) the kernel closes the socket, the server ends the session, and other executors see the
 * pid vanish from `pg_stat_activity` at once — no lease has to lapse. It also LISTENs on
 * `cairn_wake` (every executor's wake-ups) and on its own channel (`ownWakeChannel`: the runs
 * dispatched to this executor).
 *
 * Opened on first use (a CLI that only reads never opens it). When it is lost — the server
 * restarted, the network dropped, someone ran `pg_terminate_backend` — the wake listeners are
 * called (so the engine polls and notices) and it is opened again, with backoff, until it is back.
 * Meanwhile `currentPid()` answers null; afterwards it answers the NEW backend pid. The executor
 * compares that with the pid in its row: a different pid means peers may already have counted it
 * dead and taken its runs, so it re-registers under a new identity (see Executor).
 */
export class PostgresSession {
  private connected: Promise<Connected> | null = null;
  private live: Connected | null = null;
  private closing = false;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private readonly listeners = new Set<(payload?: string) => void>();

  constructor(
    private readonly url: string,
    private readonly types: pg.CustomTypesConfig,
  ) {}

  /** Opens the session if it never was (waiting for it), then answers as `currentPid()` does. */
  async pid(): Promise<number | null> {
    if (this.connected === null && this.live === null && this.reconnectTimer === null) await this.open();
    return this.currentPid();
  }

  /** The backend pid of the session as it is now: null while it is lost and being reopened. */
  currentPid(): number | null {
    return this.live?.pid ?? null;
  }

  /** The channel this session listens on for wake-ups meant for it alone; null while it is lost. */
  currentOwnChannel(): string | null {
    return this.live === null ? null : ownWakeChannel(this.live.pid);
  }

  /**
   * Listening starts with the session; `await pid()` first to be sure no wake-up is missed. A
   * notification's payload is passed on; a lost session calls with none (anything may have happened).
   */
  onWake(listener: (payload?: string) => void): void {
    this.listeners.add(listener);
    if (this.live === null && this.reconnectTimer === null) this.open().catch(() => undefined);
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.reconnectTimer !== null) clearTimeout(this.reconnectTimer);
    const session = await this.connected?.catch(() => null);
    this.connected = null;
    this.live = null;
    // A socket to a server that vanished can take long to end: do not wait on it past a moment.
    await Promise.race([session?.client.end().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
  }

  private open(): Promise<Connected> {
    this.connected ??= this.connect().then(
      (session) => {
        this.failures = 0;
        this.live = session;
        return session;
      },
      (error: unknown) => {
        this.connected = null;
        throw error;
      },
    );
    return this.connected;
  }

  private lost(client: pg.Client): void {
    if (this.closing || this.live?.client !== client) return;
    this.live = null;
    this.connected = null;
    client.end().catch(() => undefined);
    this.wake();
    this.reopenLater();
  }

  private reopenLater(): void {
    if (this.closing || this.reconnectTimer !== null) return;
    this.failures++;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      this.open().then(
        () => this.wake(),
        () => this.reopenLater(),
      );
    }, backoffMs(this.failures));
    this.reconnectTimer.unref();
  }

  private async connect(): Promise<Connected> {
    const client = new pg.Client({
      connectionString: this.url,
      types: this.types,
      keepAlive: true,
      connectionTimeoutMillis: 10_000,
      // The server notices a vanished machine (not only a killed process) within about 25 s.
      options: "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3",
    });
    const lost = (): void => this.lost(client);
    client.on("error", lost);
    client.on("end", lost);
    let own: string | null = null;
    client.on("notification", (message) => {
      if (message.channel === WAKE_CHANNEL || message.channel === own) this.wake(message.payload);
    });
    try {
      await client.connect();
      const result = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      const pid = result.rows[0]!.pid;
      own = ownWakeChannel(pid);
      // Both before the pid is known to anyone: nothing can be dispatched to it unheard. And first,
      // this session is exempt from `idle_session_timeout` (PostgreSQL 14+; older servers do not
      // know it, which the block ignores): a listening session is idle by nature, and one a DBA's
      // timeout ended every few minutes made the executor re-register each time — letting go of
      // every run it had loaded, to claim them back and replay them.
      await client.query(`${KEEP_WHILE_IDLE}; LISTEN ${WAKE_CHANNEL}; LISTEN ${own}`);
      return { client, pid };
    } catch (error) {
      client.removeListener("end", lost);
      client.removeListener("error", lost);
      client.on("error", () => undefined);
      await client.end().catch(() => undefined);
      throw error;
    }
  }

  private wake(payload?: string): void {
    for (const listener of this.listeners) listener(payload);
  }
}
