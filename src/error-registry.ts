import {
  ApprovalDeniedError,
  BudgetExceededError,
  CairnError,
  CancelledError,
  FencedError,
  InvalidInputError,
  InvalidSpecError,
  IsolatedStepCrashedError,
  NonDeterminismError,
  NotACairnDatabaseError,
  PermissionDeniedError,
  PoisonRunError,
  SupervisorShutdownError,
  AiSdkUnavailableError,
  RetryableError,
  RunNotFoundError,
  TerminalError,
  TimeoutError,
  UnserializableError,
} from "./errors.js";

/**
 * The error classes the journal can rebuild. A step that throws an instance of a registered class
 * throws an instance of that class again on replay (`instanceof` holds), with its message, stack,
 * `cause` and own enumerable fields. An error of an unregistered class comes back as an `Error`
 * with the same `name`, message and fields.
 *
 * Registered from the start: `Error`, `TypeError`, `RangeError`, `SyntaxError`, `EvalError`,
 * `ReferenceError`, `URIError`, `AggregateError`, every Cairn error, and (when `cairn` or
 * `cairn/ai` is loaded) the AI SDK's error classes (`APICallError`, `RetryError`, ...).
 *
 * The journal records a class by its key (its `name` option, else the class's name), so the key
 * must stay the same across deploys, and two classes may not share one.
 */

/** Any class whose instances are errors. Its constructor is never called on rebuild. */
export type ErrorClass = abstract new (...args: never[]) => Error;

export interface ErrorClassOptions {
  /** The key the journal records the class under. Default: the class's `name`. */
  name?: string;
  /**
   * Recognises instances that `instanceof` misses — a second copy of the library that defines the
   * class, for example — the way the AI SDK's `APICallError.isInstance` does.
   */
  isInstance?: (error: unknown) => boolean;
}

interface Entry {
  key: string;
  prototype: object;
  isInstance: ((error: unknown) => boolean) | undefined;
  /** Prototype-chain length: the most derived class wins when several predicates match. */
  depth: number;
  /** How to make an instance: Cairn's own errors go through their constructors. */
  make: ((message: string) => Error) | undefined;
}

const byKey = new Map<string, Entry>();
const byPrototype = new Map<object, Entry>();
let withPredicates: Entry[] = [];

/**
 * Makes `errorClass` rebuildable from the journal. Call it at startup, before runs that may throw it
 * are replayed, in every process that replays them. Registering the same class twice is harmless;
 * registering another class under a taken key throws an `InvalidSpecError`.
 */
export function registerErrorClass(errorClass: ErrorClass, options: ErrorClassOptions = {}): void {
  register(errorClass, options, undefined);
}

function register(errorClass: ErrorClass, options: ErrorClassOptions, make: Entry["make"]): void {
  if (typeof errorClass !== "function" || !(errorClass.prototype instanceof Error || errorClass === Error)) {
    throw new InvalidSpecError("errorClass", errorClass, "registerErrorClass needs a class that extends Error");
  }
  const key = options.name ?? errorClass.name;
  if (typeof key !== "string" || key.length === 0) {
    throw new InvalidSpecError("name", key, "an anonymous error class needs a { name } to be recorded under");
  }
  const taken = byKey.get(key);
  if (taken !== undefined) {
    if (taken.prototype === errorClass.prototype) return;
    throw new InvalidSpecError("name", key, "another error class is registered under this name; pass { name } to tell them apart");
  }
  const prototype = errorClass.prototype as object;
  let depth = 0;
  for (let p: object | null = prototype; p !== null; p = Object.getPrototypeOf(p) as object | null) depth++;
  const entry: Entry = { key, prototype, isInstance: options.isInstance, depth, make };
  byKey.set(key, entry);
  if (!byPrototype.has(prototype)) byPrototype.set(prototype, entry);
  if (entry.isInstance !== undefined) withPredicates = [...withPredicates, entry].sort((a, b) => b.depth - a.depth);
}

/** The key of the nearest registered class of `error` ("Error" when none is). */
export function errorClassKey(error: Error): string {
  for (let p = Object.getPrototypeOf(error) as object | null; p !== null && p !== Error.prototype; p = Object.getPrototypeOf(p) as object | null) {
    const entry = byPrototype.get(p);
    if (entry !== undefined) return entry.key;
  }
  for (const entry of withPredicates) if (entry.isInstance!(error)) return entry.key;
  return "Error";
}

/**
 * A bare instance of the class registered under `key` (an `Error` when it is unknown — say, a
 * class this process has not registered): a real Error object (stack, `util.types.isNativeError`)
 * whose prototype is the class's, so `instanceof` holds without running a user constructor.
 */
export function makeError(key: string, message: string): Error {
  const entry = byKey.get(key);
  if (entry?.make !== undefined) return entry.make(message);
  const error = new Error(message);
  if (entry !== undefined && entry.prototype !== Error.prototype) Object.setPrototypeOf(error, entry.prototype);
  return error;
}

export function isRegisteredErrorClass(key: string): boolean {
  return byKey.has(key);
}

for (const builtIn of [Error, TypeError, RangeError, SyntaxError, EvalError, ReferenceError, URIError, AggregateError]) {
  register(builtIn, {}, undefined);
}

// Cairn's errors are rebuilt through their constructors, which set `name` and `code`.
for (const cairnClass of [
  CairnError,
  TerminalError,
  RetryableError,
  CancelledError,
  TimeoutError,
  NonDeterminismError,
  BudgetExceededError,
  PermissionDeniedError,
  ApprovalDeniedError,
  InvalidInputError,
  UnserializableError,
  NotACairnDatabaseError,
  FencedError,
  PoisonRunError,
  AiSdkUnavailableError,
  SupervisorShutdownError,
]) {
  register(cairnClass, {}, (message) => new cairnClass(message));
}
// Their constructors build the message from parts; the record already holds the message.
register(InvalidSpecError, {}, (message) => Object.assign(new InvalidSpecError("", undefined, ""), { message }));
register(RunNotFoundError, {}, (message) => Object.assign(new RunNotFoundError(""), { message }));
register(IsolatedStepCrashedError, {}, (message) => new IsolatedStepCrashedError(message));
