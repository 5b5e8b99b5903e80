import type pg from "pg";

/** Key of the advisory lock one keeper of a database holds while it analyzes ("cairnst" in ASCII). */
export const ANALYZE_LOCK = 0x636169726e7374;

/** A table is analyzed once at least this many of its rows changed since its statistics were taken (or since it was made). */
export const MIN_CHANGED_ROWS = 500;

/** How often a keeper looks (first a few seconds after its executor registers: a database restored or upgraded has no statistics at all). */
export const STATISTICS_CHECK_MS = 5_000;
const FIRST_CHECK_MS = 1_000;

/**
 * Tables whose statistics are far behind them: never analyzed, or changed since by at least as
 * many rows as they held then (grown to twice their size, or rewritten whole), and by at least
 * MIN_CHANGED_ROWS. `reltuples` is -1 for a table never analyzed nor vacuumed.
 */
const BEHIND = `SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
  WHERE s.schemaname = current_schema() AND s.relname LIKE 'cairn\\_%'
    AND s.n_mod_since_analyze >= $1 AND s.n_mod_since_analyze >= GREATEST(c.reltuples, 0)
  ORDER BY s.relname`;

/**
 * Keeps the planner's statistics of Cairn's tables from falling far behind their contents
 * (PostgreSQL). Cairn's statements are prepared, and each session keeps a statement's generic
 * plan — and its stored functions' plans — until the statistics of a table it reads change. A
 * plan made while the tables held a handful of rows, or made on tables never analyzed (a new
 * database, one restored or upgraded with `pg_upgrade`, which carries no statistics over), can
 * be a nested loop that reads a whole table per row: measured, the claim's look for claimable
 * runs took 2–4 s a call with 10,000 runs waiting in a queue, against 1 ms on the same rows once
 * analyzed. Autovacuum's ANALYZE mends that, but only at its next round (a minute apart by
 * default), when it has a worker free, if it is on — and never for a database restored by
 * `pg_upgrade` until a tenth of each table has changed.
 *
 * So a store whose executor runs looks every STATISTICS_CHECK_MS for tables that changed, since
 * their statistics were taken, by as many rows as they then held (and by MIN_CHANGED_ROWS), and
 * ANALYZEs them, which makes every session plan its statements again. Autovacuum's threshold is
 * a tenth of a table: where it keeps up, this finds nothing to do. One keeper at a time per
 * database analyzes (an advisory lock; the others skip that round). A table this role may not
 * analyze is skipped by the server with a warning, and looked at again next round.
 *
 * Failure semantics: ANALYZE reads a sample and writes only statistics; a failed or interrupted
 * round (the server restarting, say) changes nothing Cairn stores, and the next round tries again.
 */
export class StatisticsKeeper {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<string[]> | null = null;

  constructor(
    private readonly pool: pg.Pool,
    private readonly intervalMs = STATISTICS_CHECK_MS,
  ) {}

  /** Starts looking (again: a second call keeps the one timer). */
  start(): void {
    if (this.timer !== null) return;
    const round = (): void => {
      this.timer = setTimeout(
        () => {
          this.check().catch(() => undefined); // tried again next round
          round();
        },
        this.timer === null ? Math.min(FIRST_CHECK_MS, this.intervalMs) : this.intervalMs,
      );
      this.timer.unref();
    };
    round();
  }

  /** Stops looking, and waits for a round in flight. */
  async stop(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }

  /** One round: analyzes the tables behind, and returns their names (none when a peer holds the lock). */
  check(): Promise<string[]> {
    this.running ??= this.analyzeBehind().finally(() => (this.running = null));
    return this.running;
  }

  private async analyzeBehind(): Promise<string[]> {
    const behind = (await this.pool.query<{ relname: string }>({ name: "cairn_statistics_behind", text: BEHIND, values: [MIN_CHANGED_ROWS] })).rows;
    if (behind.length === 0) return [];
    const client = await this.pool.connect();
    let locked = false;
    try {
      locked = (await client.query<{ locked: boolean }>("SELECT pg_try_advisory_lock($1) AS locked", [ANALYZE_LOCK])).rows[0]?.locked === true;
      if (!locked) return [];
      // Quoted as identifiers: the names come from the catalog, not from anyone's input, but a
      // table an operator named oddly must not break the statement.
      for (const { relname } of behind) await client.query(`ANALYZE ${client.escapeIdentifier(relname)}`);
      return behind.map((row) => row.relname);
    } finally {
      if (locked) await client.query("SELECT pg_advisory_unlock($1)", [ANALYZE_LOCK]).catch(() => undefined);
      client.release();
    }
  }
}
