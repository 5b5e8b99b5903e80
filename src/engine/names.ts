import { InvalidSpecError } from "../errors.js";

/**
 * The rules every name, id and topic obeys before Cairn writes or executes anything with it — the
 * same on SQLite and PostgreSQL, so a value one backend accepts the other stores and reads back
 * unchanged:
 *
 * - a string, at most {@link MAX_NAME_LENGTH} characters (UTF-16 code units, JavaScript's
 *   `length`: at most 1,020 bytes of UTF-8, well inside any index);
 * - no NUL character: PostgreSQL cannot store U+0000 in `text` at all (a workflow *named* with one
 *   made every claim of every workflow fail);
 * - well-formed Unicode (`String.prototype.isWellFormed`): a lone surrogate — what `.slice()` can
 *   leave of an emoji — is stored by SQLite as WTF-8 and read back as U+FFFD, so a run whose id
 *   holds one could never match its own fence, and a step name with one never matched on replay;
 * - non-empty for workflow names, run ids, topics and event keys (a step's name may be empty).
 *
 * Checks are cheap (a length, a `includes`, a native scan) because step names are checked on every
 * step.
 */
export const MAX_NAME_LENGTH = 255;

/** Node 20 has `isWellFormed` (ES2024); the compiler's lib here is older. */
interface WellFormedString {
  isWellFormed(): boolean;
}

export type NameField = "workflow name" | "agent name" | "id" | "runId" | "topic" | "key" | "idempotencyKey" | "step name" | (string & {});

/** Throws InvalidSpecError naming `field` and `value` unless `value` obeys the rules above. */
export function validateName(field: NameField, value: unknown, options: { allowEmpty?: boolean } = {}): asserts value is string {
  if (typeof value !== "string") throw new InvalidSpecError(field, value, `a ${field} must be a string`);
  if (value.length === 0) {
    if (options.allowEmpty === true) return;
    throw new InvalidSpecError(field, value, `a ${field} must not be empty`);
  }
  if (value.length > MAX_NAME_LENGTH) {
    throw new InvalidSpecError(field, value, `a ${field} is at most ${MAX_NAME_LENGTH} characters; this one has ${value.length}`);
  }
  if (value.includes("\u0000")) {
    throw new InvalidSpecError(field, value, `a ${field} must not contain a NUL character (U+0000), which PostgreSQL cannot store`);
  }
  if (!(value as unknown as WellFormedString).isWellFormed()) {
    throw new InvalidSpecError(
      field,
      value,
      `a ${field} must be well-formed Unicode; it holds a lone surrogate (a character cut in half, e.g. by .slice() on an emoji)`,
    );
  }
}

export function validateWorkflowName(name: unknown, field: NameField = "workflow name"): asserts name is string {
  validateName(field, name);
}

export function validateRunId(id: unknown, field: NameField = "runId"): asserts id is string {
  validateName(field, id);
}

export function validateTopic(topic: unknown): asserts topic is string {
  validateName("topic", topic);
}

/**
 * For the engine's `begin()` of each durable operation: a step's (or timer's, model call's...) name
 * may be empty; a `send` or `recv` names its topic, which may not.
 */
export function validateOperationName(kind: string, name: unknown): asserts name is string {
  if (kind === "send" || kind === "recv") validateTopic(name);
  else validateName("step name", name, { allowEmpty: true });
}
