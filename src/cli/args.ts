import { CliError } from "./cli-error.js";

/** What an option takes: a value (`--limit 5`, `--limit=5`) or nothing (`--json`). */
export type OptionKind = "string" | "boolean";

export type OptionSpec = Record<string, OptionKind>;

export interface ParsedArgs {
  positionals: string[];
  /** Option values by name; a boolean option present is `true`. A repeated option keeps the last. */
  options: Record<string, string | true>;
}

/** The options every command takes. */
export const GLOBAL_OPTIONS: OptionSpec = { database: "string", json: "boolean", help: "boolean" };

const SHORT: Record<string, string> = { h: "help" };

/**
 * Splits argv into positionals and the options in `spec`. Options may come anywhere; `--` ends
 * them. A token like `-5` or `-0.5` is a positional (a JSON number for `cairn send`), not an option.
 */
export function parseArgs(argv: readonly string[], spec: OptionSpec, command: string): ParsedArgs {
  const positionals: string[] = [];
  const options: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (token === "--") {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!token.startsWith("-") || token === "-" || /^-\d/.test(token)) {
      positionals.push(token);
      continue;
    }
    const equals = token.indexOf("=");
    const rawName = token.startsWith("--") ? token.slice(2, equals === -1 ? undefined : equals) : (SHORT[token.slice(1)] ?? token);
    const kind = spec[rawName];
    if (kind === undefined) throw new CliError(`unknown option ${token.split("=")[0]}`, `see \`${helpCommand(command)}\``);
    if (kind === "boolean") {
      if (equals !== -1) throw new CliError(`--${rawName} takes no value`, `write just --${rawName}`);
      options[rawName] = true;
      continue;
    }
    let value: string | undefined;
    if (equals !== -1) value = token.slice(equals + 1);
    else value = argv[++i];
    if (value === undefined) throw new CliError(`--${rawName} needs a value`, `see \`${helpCommand(command)}\``);
    options[rawName] = value;
  }
  return { positionals, options };
}

/** The command name: the first token that is neither an option nor a global option's value. */
export function findCommand(argv: readonly string[]): { command: string | undefined; rest: string[] } {
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    if (token === "--") break;
    if (!token.startsWith("-")) return { command: token, rest: [...argv.slice(0, i), ...argv.slice(i + 1)] };
    const name = token.startsWith("--") ? token.slice(2) : token;
    if (GLOBAL_OPTIONS[name] === "string") i++;
  }
  return { command: undefined, rest: [...argv] };
}

/** Requires exactly the named positionals (in order) and returns them. */
export function positionals(args: ParsedArgs, names: readonly string[], command: string): string[] {
  if (args.positionals.length < names.length) {
    const missing = names[args.positionals.length]!;
    throw new CliError(`missing <${missing}>`, `usage: see \`${helpCommand(command)}\``);
  }
  if (args.positionals.length > names.length) {
    const extra = args.positionals[names.length]!;
    throw new CliError(`unexpected argument "${extra}"`, `quote arguments that contain spaces; see \`${helpCommand(command)}\``);
  }
  return args.positionals;
}

export function stringOption(args: ParsedArgs, name: string): string | undefined {
  const value = args.options[name];
  return typeof value === "string" ? value : undefined;
}

/** An integer option ≥ `min`, or undefined when absent. */
export function integerOption(args: ParsedArgs, name: string, min: number): number | undefined {
  const text = stringOption(args, name);
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!/^-?\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < min) {
    throw new CliError(`--${name} must be an integer ≥ ${min}, not "${text}"`, `for example --${name} ${Math.max(min, 1)}`);
  }
  return value;
}

function helpCommand(command: string): string {
  return command === "" ? "cairn --help" : `cairn ${command} --help`;
}
