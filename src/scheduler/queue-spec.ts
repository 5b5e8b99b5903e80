import { InvalidSpecError } from "../errors.js";
import { validateName } from "../engine/names.js";
import { isBuiltInPolicy, POLICIES, type BuiltInPolicy } from "./policies.js";

/**
 * A queue, declared in code with `cairn.queue(name, options)` and kept in `cairn_queues`. Every
 * limit is optional; a queue without any runs its runs as fast as executors serving it can take
 * them. Limits count runs that were dispatched and have not finished (running, or waiting on a
 * timer or a message: a sleeping run keeps its slot).
 */
export interface QueueOptions {
  /** At most this many runs of the queue at once, across every executor. */
  concurrency?: number;
  /** At most this many runs of the queue at once on any one executor. */
  workerConcurrency?: number;
  /** At most `limit` dispatches in any window of `periodMs` milliseconds. */
  rateLimit?: { limit: number; periodMs: number };
  /** Honour `enqueue`'s `priority` (lower first); without it a priority is refused. */
  priority?: boolean;
  /**
   * Partitions the queue by a key (a tenant, a customer): runs of one key never take more than
   * `concurrency` slots at once, and dispatch serves the key running the fewest first, so a key with
   * 10,000 queued runs does not starve one with 3. `key` gives the key of a run enqueued without a
   * `partitionKey`.
   */
  partitionBy?: { concurrency?: number; key?: (input: unknown) => string };
  /**
   * Which executor takes which run: "fifo" (default), "least_loaded", "locality" (executors serving
   * the run's partition; after `localityWaitMs`, any), or `{ sql }`, a SELECT over `candidates`
   * returning `run_id, executor_id` (see policies.ts for the columns).
   */
  policy?: BuiltInPolicy | { sql: string };
  /** How long a run waits for an executor serving its partition before any may take it ("locality"). Default 5000. */
  localityWaitMs?: number;
}

/** What is stored in `cairn_queues`: the options, checked, with the policy as its SQL. */
export interface QueueSpec {
  name: string;
  concurrency: number | null;
  workerConcurrency: number | null;
  partitionConcurrency: number | null;
  rateLimit: number | null;
  ratePeriodMs: number | null;
  priority: boolean;
  policy: string;
  policySql: string;
  localityWaitMs: number;
  partitionKeyOf: ((input: unknown) => string) | null;
}

export function queueSpec(name: string, options: QueueOptions = {}): QueueSpec {
  validateName("name", name);
  if (options === null || typeof options !== "object") throw new InvalidSpecError("options", options, "give an object of queue options");
  const known = new Set(["concurrency", "workerConcurrency", "rateLimit", "priority", "partitionBy", "policy", "localityWaitMs"]);
  for (const key of Object.keys(options)) {
    if (!known.has(key)) throw new InvalidSpecError(key, (options as Record<string, unknown>)[key], `is not a queue option (${[...known].join(", ")})`);
  }
  const rate = options.rateLimit;
  if (rate !== undefined && (rate === null || typeof rate !== "object")) {
    throw new InvalidSpecError("rateLimit", rate, "give { limit, periodMs }: at most `limit` dispatches per `periodMs` milliseconds");
  }
  const partitionBy = options.partitionBy;
  if (partitionBy !== undefined && (partitionBy === null || typeof partitionBy !== "object")) {
    throw new InvalidSpecError("partitionBy", partitionBy, "give { concurrency?, key? }");
  }
  if (partitionBy?.key !== undefined && typeof partitionBy.key !== "function") {
    throw new InvalidSpecError("partitionBy.key", partitionBy.key, "must be a function of the run's input returning its partition key");
  }
  if (options.priority !== undefined && typeof options.priority !== "boolean") {
    throw new InvalidSpecError("priority", options.priority, "must be true or false");
  }
  const { policy, policySql } = policyOf(options.policy);
  return {
    name,
    concurrency: limit("concurrency", options.concurrency),
    workerConcurrency: limit("workerConcurrency", options.workerConcurrency),
    partitionConcurrency: limit("partitionBy.concurrency", partitionBy?.concurrency),
    rateLimit: rate === undefined ? null : limit("rateLimit.limit", rate.limit, true),
    ratePeriodMs: rate === undefined ? null : limit("rateLimit.periodMs", rate.periodMs, true),
    priority: options.priority ?? false,
    policy,
    policySql,
    localityWaitMs: limit("localityWaitMs", options.localityWaitMs, false, 0) ?? 5_000,
    partitionKeyOf: partitionBy?.key ?? null,
  };
}

function limit(field: string, value: unknown, required = false, min = 1): number | null {
  if (value === undefined && !required) return null;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidSpecError(field, value, `must be an integer ≥ ${min}`);
  }
  return value;
}

function policyOf(policy: QueueOptions["policy"]): { policy: string; policySql: string } {
  if (policy === undefined) return { policy: "fifo", policySql: POLICIES.fifo };
  if (typeof policy === "string") {
    if (!isBuiltInPolicy(policy)) {
      throw new InvalidSpecError("policy", policy, `is not a built-in policy (${Object.keys(POLICIES).join(", ")}); give { sql } for your own`);
    }
    return { policy, policySql: POLICIES[policy] };
  }
  if (policy === null || typeof policy !== "object" || typeof policy.sql !== "string") {
    throw new InvalidSpecError("policy", policy, 'give "fifo", "least_loaded", "locality" or { sql: "SELECT run_id, executor_id FROM candidates ..." }');
  }
  return { policy: "sql", policySql: checkPolicySql(policy.sql) };
}

/**
 * A user policy must be one SELECT (or WITH ... SELECT) without parameters: it becomes a subquery
 * of the dispatch statement, so a second statement or a write would run inside the dispatch.
 * Quoted text and comments are skipped when looking for `;` and `$`.
 */
export function checkPolicySql(sql: string): string {
  const text = sql.trim().replace(/;\s*$/, "");
  const bare = text
    .replace(/--[^\n]*/g, " ")
    .replace(/\/\*[\s\S]*?\*\//g, " ")
    .replace(/'(?:[^']|'')*'/g, "''")
    .replace(/"(?:[^"]|"")*"/g, '""')
    .trim();
  if (!/^(select|with)\b/i.test(bare)) {
    throw new InvalidSpecError("policy.sql", sql, "must be a single SELECT over `candidates` returning run_id, executor_id");
  }
  if (bare.includes(";")) throw new InvalidSpecError("policy.sql", sql, "must be a single statement (no `;` inside)");
  if (bare.includes("$")) throw new InvalidSpecError("policy.sql", sql, "takes no parameters: read the queue's settings from `candidates`");
  if (/\b(insert|update|delete|merge|drop|alter|create|truncate|grant|attach|pragma)\b/i.test(bare)) {
    throw new InvalidSpecError("policy.sql", sql, "must only read: a policy chooses, the dispatch writes");
  }
  return text;
}
