import { InvalidSpecError } from "../errors.js";
import type { ChildWorkflow } from "../engine/context.js";
import { validateName } from "../engine/names.js";

/**
 * A supervisor's written specification, in OTP's words (supervisor.erl) and with its defaults:
 * a restart strategy, a restart intensity (at most `intensity` restarts within `periodMs`), and an
 * ordered list of child specs. Validated up front: a bad field is an InvalidSpecError naming the
 * field and the value, before anything is registered or stored.
 */

/**
 * - `one_for_one`: a child that must be restarted is restarted alone.
 * - `one_for_all`: all other children are stopped (in reverse start order), then all are started again in order.
 * - `rest_for_one`: the children started after it are stopped (in reverse order), then it and they are started again in order.
 * - `simple_one_for_one`: one child spec, no children at first; children of it are started on demand
 *   (`cairn.supervisors.startChild`), each restarted alone with its own input.
 */
export type Strategy = "one_for_one" | "one_for_all" | "rest_for_one" | "simple_one_for_one";

/**
 * - `permanent`: always restarted.
 * - `transient`: restarted only after an abnormal exit (anything but succeeding, or a supervisor's `shutdown`).
 * - `temporary`: never restarted; its spec is dropped when it ends (also when stopped under one_for_all / rest_for_one).
 */
export type RestartType = "permanent" | "transient" | "temporary";

/**
 * How a child is stopped: `"brutal_kill"` cancels it at once; a number of milliseconds asks it to
 * stop (a `cairn:shutdown` message) and cancels it after that long; `"infinity"` waits for it.
 */
export type Shutdown = "brutal_kill" | number | "infinity";

export interface ChildSpec {
  /** Unique among the supervisor's children. */
  id: string;
  /** A workflow, an agent or another supervisor. */
  workflow: ChildWorkflow<any, unknown>;
  /** The input every (re)start of the child is given. */
  input?: unknown;
  /** Default "permanent". */
  restart?: RestartType;
  /** Default 5000 ms for workflows and agents, "infinity" for supervisors (as OTP). */
  shutdown?: Shutdown;
}

/** Delays between restarts (as Akka's BackoffSupervisor adds): off unless given. */
export interface BackoffSpec {
  /** The first delay. */
  minMs: number;
  /** The cap; delays double from minMs up to it with each restart within the period. */
  maxMs: number;
  /** Up to this fraction of the delay is added at random (recorded): 0 to 1. Default 0. */
  randomFactor?: number;
}

export interface SupervisorSpec {
  strategy?: Strategy;
  /** Restarts allowed within `periodMs`, this one included. Default 1 (OTP). */
  intensity?: number;
  /** The sliding window of the intensity. Default 5000 ms (OTP: 5 s). */
  periodMs?: number;
  children: readonly ChildSpec[];
  backoff?: BackoffSpec;
}

export interface ResolvedChildSpec {
  id: string;
  workflow: string;
  input: unknown;
  restart: RestartType;
  shutdown: Shutdown;
}

export interface ResolvedSpec {
  strategy: Strategy;
  intensity: number;
  periodMs: number;
  children: ResolvedChildSpec[];
  backoff: Required<BackoffSpec> | null;
}

export const DEFAULT_INTENSITY = 1;
export const DEFAULT_PERIOD_MS = 5_000;
export const DEFAULT_SHUTDOWN_MS = 5_000;

const STRATEGIES: readonly Strategy[] = ["one_for_one", "one_for_all", "rest_for_one", "simple_one_for_one"];
const RESTARTS: readonly RestartType[] = ["permanent", "transient", "temporary"];

export function validateSupervisorSpec(
  name: string,
  spec: SupervisorSpec,
  isSupervisor: (workflow: ChildWorkflow<any, unknown>) => boolean,
): ResolvedSpec {
  validateName("supervisor name", name);
  if (spec === null || typeof spec !== "object")
    throw new InvalidSpecError("spec", spec, `cairn.supervisor("${name}") needs { strategy, intensity, periodMs, children }`);
  const strategy = spec.strategy ?? "one_for_one";
  if (!STRATEGIES.includes(strategy)) throw new InvalidSpecError("strategy", strategy, `one of ${STRATEGIES.join(", ")}`);
  const intensity = spec.intensity ?? DEFAULT_INTENSITY;
  if (!Number.isInteger(intensity) || intensity < 0)
    throw new InvalidSpecError("intensity", intensity, "an integer ≥ 0 (restarts allowed within periodMs)");
  const periodMs = spec.periodMs ?? DEFAULT_PERIOD_MS;
  if (typeof periodMs !== "number" || !Number.isFinite(periodMs) || periodMs <= 0) {
    throw new InvalidSpecError("periodMs", periodMs, "a number of milliseconds > 0");
  }
  if (!Array.isArray(spec.children))
    throw new InvalidSpecError("children", spec.children, "an array of child specs { id, workflow, input, restart, shutdown }");
  if (strategy === "simple_one_for_one" && spec.children.length !== 1) {
    throw new InvalidSpecError("children", spec.children.length, "simple_one_for_one takes exactly one child spec (the template of its dynamic children)");
  }
  const seen = new Set<string>();
  const children = spec.children.map((child, i) => {
    const at = `children[${i}]`;
    if (child === null || typeof child !== "object") throw new InvalidSpecError(at, child, "a child spec { id, workflow, input, restart, shutdown }");
    if (typeof child.id !== "string" || child.id === "" || child.id.includes("/") || child.id.includes("~")) {
      throw new InvalidSpecError(`${at}.id`, child.id, "a non-empty string without '/' or '~' (it becomes part of the child's run id)");
    }
    validateName(`${at}.id`, child.id);
    if (seen.has(child.id)) throw new InvalidSpecError(`${at}.id`, child.id, "child ids must be unique within a supervisor");
    seen.add(child.id);
    const workflow = child.workflow as { name?: unknown } | undefined;
    if (workflow === null || typeof workflow !== "object" || typeof workflow.name !== "string") {
      throw new InvalidSpecError(`${at}.workflow`, child.workflow, "a workflow, agent or supervisor registered with this Cairn");
    }
    const restart = child.restart ?? "permanent";
    if (!RESTARTS.includes(restart)) throw new InvalidSpecError(`${at}.restart`, restart, `one of ${RESTARTS.join(", ")}`);
    const shutdown = child.shutdown ?? (isSupervisor(child.workflow) ? "infinity" : DEFAULT_SHUTDOWN_MS);
    if (!(shutdown === "brutal_kill" || shutdown === "infinity" || (typeof shutdown === "number" && Number.isInteger(shutdown) && shutdown >= 0))) {
      throw new InvalidSpecError(`${at}.shutdown`, shutdown, '"brutal_kill", "infinity" or an integer number of milliseconds ≥ 0');
    }
    return { id: child.id, workflow: workflow.name, input: child.input, restart, shutdown };
  });
  let backoff: Required<BackoffSpec> | null = null;
  if (spec.backoff !== undefined) {
    const { minMs, maxMs, randomFactor = 0 } = spec.backoff;
    if (typeof minMs !== "number" || !Number.isFinite(minMs) || minMs <= 0)
      throw new InvalidSpecError("backoff.minMs", minMs, "a number of milliseconds > 0");
    if (typeof maxMs !== "number" || !Number.isFinite(maxMs) || maxMs < minMs)
      throw new InvalidSpecError("backoff.maxMs", maxMs, "a number of milliseconds ≥ minMs");
    if (typeof randomFactor !== "number" || !(randomFactor >= 0 && randomFactor <= 1)) {
      throw new InvalidSpecError("backoff.randomFactor", randomFactor, "a number from 0 to 1");
    }
    backoff = { minMs, maxMs, randomFactor };
  }
  return { strategy, intensity, periodMs, children, backoff };
}
