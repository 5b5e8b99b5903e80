import { InvalidSpecError } from "../../errors.js";
import { validateName } from "../../engine/names.js";
import { encodeValue } from "../../store/value/index.js";
import { nextTick } from "./ticks.js";

/**
 * What happens to ticks that fell due while no executor declaring the schedule was running:
 * - `"skip"`: none of them fire; the schedule goes on from the next tick.
 * - `"latest"`: the most recent missed tick fires, once.
 * - `"all"`: every missed tick fires, oldest first, up to {@link CATCH_UP_LIMIT} (the most recent
 *   ones: a schedule down for longer loses its oldest ticks rather than flooding the queue).
 */
export type CatchUp = "skip" | "all" | "latest";

export const CATCH_UP_POLICIES: readonly CatchUp[] = ["skip", "all", "latest"];

/** The most ticks one wake-up fires for one schedule, catching up or not. */
export const CATCH_UP_LIMIT = 1000;

/** A workflow as a schedule needs it: a Cairn workflow, started by id. */
export interface SchedulableWorkflow<Input> {
  readonly name: string;
  start(input: Input, options: { id: string }): Promise<unknown>;
}

export interface ScheduleSpec<Input = unknown> {
  /** A cron expression: `m h dom mon dow`, or six fields with seconds first, or `@hourly`, `@daily` ... */
  cron: string;
  /** The workflow each tick starts (one registered on this Cairn). */
  workflow: SchedulableWorkflow<Input>;
  /** The input of every run the schedule starts. Default undefined. */
  input?: Input;
  /** An IANA time zone the cron fields are read in ("Europe/Paris"). Default "UTC". */
  timezone?: string;
  /** Missed ticks after downtime (see {@link CatchUp}). Default "skip". */
  catchUp?: CatchUp;
}

/** A validated schedule, as this process holds it. */
export interface Schedule {
  name: string;
  cron: string;
  workflow: SchedulableWorkflow<unknown>;
  input: unknown;
  /** The input encoded, as stored in cairn_schedules. */
  inputText: string;
  timezone: string;
  catchUp: CatchUp;
}

/** Run ids are `cron:<name>:<tick as ISO 8601 UTC>`; names leave room for the rest of the id. */
export const MAX_SCHEDULE_NAME_LENGTH = 200;

/** The id of the run a tick starts: the same in every executor, so a tick starts one run. */
export function tickRunId(name: string, tick: number): string {
  return `cron:${name}:${new Date(tick).toISOString()}`;
}

/**
 * Checks a declaration before anything is stored: each problem is an InvalidSpecError naming the
 * field and the value. `isRegistered` tells whether the workflow belongs to this Cairn.
 */
export function validateSchedule(name: unknown, spec: unknown, isRegistered: (workflow: SchedulableWorkflow<unknown>) => boolean, now: number): Schedule {
  validateName("name", name);
  if (name.length > MAX_SCHEDULE_NAME_LENGTH) {
    throw new InvalidSpecError("name", name, `a schedule name is at most ${MAX_SCHEDULE_NAME_LENGTH} characters (it is part of its runs' ids)`);
  }
  if (typeof spec !== "object" || spec === null) {
    throw new InvalidSpecError("spec", spec, `give schedule "${name}" an object { cron, workflow, input?, timezone?, catchUp? }`);
  }
  const { cron, workflow, input, timezone = "UTC", catchUp = "skip" } = spec as Partial<ScheduleSpec>;
  if (typeof workflow !== "object" || workflow === null || typeof workflow.start !== "function" || !isRegistered(workflow)) {
    throw new InvalidSpecError("workflow", workflow, `schedule "${name}" needs a workflow returned by cairn.workflow() or cairn.agent() on this Cairn`);
  }
  if (typeof timezone !== "string" || !isTimeZone(timezone)) {
    throw new InvalidSpecError("timezone", timezone, 'give an IANA time zone name such as "UTC" or "Europe/Paris"');
  }
  if (!(CATCH_UP_POLICIES as readonly unknown[]).includes(catchUp)) {
    throw new InvalidSpecError("catchUp", catchUp, `must be one of ${CATCH_UP_POLICIES.map((p) => `"${p}"`).join(", ")}`);
  }
  validateCron(cron, timezone, now);
  const inputText = encodeValue(input, `input of schedule "${name}"`);
  return { name, cron, workflow, input, inputText, timezone, catchUp: catchUp as CatchUp };
}

function validateCron(cron: unknown, timezone: string, now: number): asserts cron is string {
  const usage = 'give five fields "m h dom mon dow" (six with seconds first), or an alias such as "@hourly"';
  if (typeof cron !== "string") throw new InvalidSpecError("cron", cron, usage);
  const fields = cron.trim().split(/\s+/);
  // cron-parser fills in missing fields ("* * *" parses); a schedule must say all of them.
  const alias = fields.length === 1 && fields[0]!.startsWith("@");
  if (!alias && fields.length !== 5 && fields.length !== 6) throw new InvalidSpecError("cron", cron, `${usage}; this has ${fields.length}`);
  try {
    nextTick(cron, timezone, now);
  } catch (error) {
    throw new InvalidSpecError("cron", cron, `${(error as Error).message}; ${usage}`);
  }
}

function isTimeZone(timezone: string): boolean {
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
    return true;
  } catch {
    return false;
  }
}
