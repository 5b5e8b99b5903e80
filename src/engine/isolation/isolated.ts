import { isAbsolute } from "node:path";
import { pathToFileURL } from "node:url";
import { InvalidSpecError } from "../../errors.js";
import { decodeValue, encodeValue } from "../../store/value/index.js";
import type { StepCall, StepOptions } from "../context.js";

/**
 * How code reaches an isolated step's process: by **module URL and export name**, the way Piscina
 * (`filename` + `name`) and Node's own workers do — never by shipping a function.
 *
 * Why not a function serialized by its source (workerpool's `pool.exec(fn)`)? A demanding user
 * would trip on it at once: a JavaScript function cannot be shipped with its closure, and nothing
 * reliable can tell a self-contained function from one that reads a variable, an import or a
 * helper the compiler inserted (TypeScript's `__awaiter`, a bundler's renamed imports, the coverage
 * counters vitest and istanbul add to every function). Such a function works in the unit test and
 * breaks in production, or the reverse. A module is what Node can load in another process the same
 * way it loads it here: its imports resolve, it is type-checked, and it can be tested on its own.
 *
 * The export is called with the step's input and an `IsolatedCall`; what it returns (or throws) is
 * the step's outcome. Both cross the process boundary through the journal's codec (README,
 * "Values"), the encoding the journal itself uses, so an isolated step accepts and returns exactly
 * what an in-process step can record — and a value the journal would refuse is refused in the
 * process that made it, with an `UnserializableError` naming the path to the bad part.
 *
 * Put isolated exports in a module with no side effects at import (no `new Cairn`, no `launch`):
 * each pool process imports it once and keeps it, as Piscina's workers do, so module-level state
 * lives as long as the process (until it crashes or the pool shuts down).
 */

/** What an isolated export receives besides its input. */
export interface IsolatedCall {
  /** `runId:seq` (or the enclosing step's key): the same on every attempt and after every crash. */
  idempotencyKey: string;
  /** 1 for the first attempt in this executor. */
  attempt: number;
}

/** An export an isolated step can run: a function of a codec value, returning one. */
export type IsolatedExport = (input: never, call: IsolatedCall) => unknown;

/** Where an isolated step's code lives. */
export interface IsolatedTarget {
  /** A `file:` URL. */
  readonly module: string;
  readonly exportName: string;
}

/** A step function made by `isolated(...).with(input)`: what a step with `isolation: "process"` runs. */
export type IsolatedStep<O> = ((call: StepCall) => Promise<O>) & { readonly [ISOLATED]: IsolatedTarget & { readonly input: unknown } };

/** An AI SDK tool `execute` made by `isolated(...).tool(options)`. */
export type IsolatedToolExecute<I, O> = ((input: I, options?: unknown) => Promise<O>) & {
  readonly [ISOLATED]: IsolatedTarget & { readonly options: IsolationOptions };
};

/**
 * The options that send a step or a tool to a pool process — a step's own options (StepOptions:
 * `isolation`, `timeoutMs`, `maxMemoryMb`, and the retry policy, which applies as to any step).
 */
export type IsolationOptions = Pick<StepOptions, "isolation" | "timeoutMs" | "maxMemoryMb" | "retries" | "backoff" | "shouldRetry">;

export interface IsolatedFunction<I, O> extends IsolatedTarget {
  /** The step function for `ctx.step(name, f.with(input), { isolation: "process", ... })`. */
  with(input: I): IsolatedStep<O>;
  /** A tool `execute` for the AI SDK's `tool({ inputSchema, execute: f.tool({ isolation: "process", ... }) })`. */
  tool(options: IsolationOptions): IsolatedToolExecute<I, O>;
}

/** Marks the functions `isolated` makes, so the engine and the tool wrapper know where their code lives. */
export const ISOLATED = Symbol.for("cairn.isolated");

/**
 * Names an export of a module as code an isolated step or tool can run in another process:
 * `isolated(import.meta.url, "parsePdf")` or `isolated(new URL("./pdf.js", import.meta.url), "parsePdf")`.
 * Type it with the export's own type: `isolated<typeof import("./pdf.js").parsePdf>(...)`.
 *
 * Without `isolation: "process"` the same step runs in this process (its input and output still
 * go through the codec, so moving it into a process changes nothing it sees).
 */
export function isolated<F extends IsolatedExport = (input: unknown, call: IsolatedCall) => unknown>(
  module: string | URL,
  exportName: string,
): IsolatedFunction<Parameters<F>[0], Awaited<ReturnType<F>>> {
  type I = Parameters<F>[0];
  type O = Awaited<ReturnType<F>>;
  const target: IsolatedTarget = { module: moduleUrl(module), exportName: validExportName(exportName) };
  return {
    ...target,
    with(input: I): IsolatedStep<O> {
      const step = (call: StepCall) => runHere(target, input, { idempotencyKey: call.idempotencyKey, attempt: call.attempt }) as Promise<O>;
      return Object.assign(step, { [ISOLATED]: { ...target, input } });
    },
    tool(options: IsolationOptions): IsolatedToolExecute<I, O> {
      if (typeof options !== "object" || options === null)
        throw new InvalidSpecError("options", options, 'give { isolation: "process", timeoutMs, maxMemoryMb }');
      const execute = (input: I) => runHere(target, input, { idempotencyKey: "", attempt: 1 }) as Promise<O>;
      return Object.assign(execute, { [ISOLATED]: { ...target, options: { ...options } } });
    },
  };
}

/** Where an isolated step's function says its code lives, if it was made by `isolated`. */
export function isolatedStepTarget(fn: unknown): (IsolatedTarget & { input: unknown }) | undefined {
  return typeof fn === "function" ? (fn as Partial<IsolatedStep<unknown>>)[ISOLATED] : undefined;
}

/** The same for a tool's `execute`. */
export function isolatedToolTarget(fn: unknown): (IsolatedTarget & { options: IsolationOptions }) | undefined {
  const target = typeof fn === "function" ? (fn as Partial<IsolatedToolExecute<unknown, unknown>>)[ISOLATED] : undefined;
  return target !== undefined && "options" in target ? target : undefined;
}

/** Loads the export in this process (the isolated process's code does the same; see isolated-child.ts). */
export async function loadExport(target: IsolatedTarget): Promise<(input: unknown, call: IsolatedCall) => unknown> {
  const loaded = (await import(target.module)) as Record<string, unknown>;
  const fn = loaded[target.exportName];
  if (typeof fn !== "function") {
    throw new InvalidSpecError(
      "exportName",
      target.exportName,
      `${target.module} has no exported function of that name (its exports: ${Object.keys(loaded).join(", ") || "none"})`,
    );
  }
  return fn as (input: unknown, call: IsolatedCall) => unknown;
}

/** Runs the export here, with the input and output through the codec as they would cross to a process. */
async function runHere(target: IsolatedTarget, input: unknown, call: IsolatedCall): Promise<unknown> {
  const fn = await loadExport(target);
  const output = await fn(decodeValue(encodeValue(input, `input of ${target.exportName}`)), call);
  return decodeValue(encodeValue(output, `output of ${target.exportName}`));
}

function moduleUrl(module: string | URL): string {
  if (module instanceof URL) {
    if (module.protocol === "file:") return module.href;
  } else if (typeof module === "string") {
    if (module.startsWith("file:")) return new URL(module).href;
    if (isAbsolute(module)) return pathToFileURL(module).href;
  }
  throw new InvalidSpecError(
    "module",
    module,
    'name the module by a file: URL or an absolute path — import.meta.url, or new URL("./tasks.js", import.meta.url)',
  );
}

function validExportName(name: string): string {
  if (typeof name !== "string" || name.length === 0) {
    throw new InvalidSpecError("exportName", name, "name the module's exported function, as a non-empty string");
  }
  return name;
}
