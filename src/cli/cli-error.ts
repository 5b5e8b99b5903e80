import { CairnError } from "../errors.js";

/**
 * A failure the CLI reports as one line, `cairn: <what was wrong> — <what to do>`, with exit
 * code 1. Anything a command throws ends up here, through `describeError`.
 */
export class CliError extends Error {
  constructor(
    readonly what: string,
    readonly todo: string,
  ) {
    super(`${what} — ${todo}`);
    this.name = "CliError";
  }
}

/** What to do about a CairnError whose message does not already say. */
const HINTS: Partial<Record<string, string>> = {
  RUN_NOT_FOUND: "list runs with `cairn runs`",
  NOT_A_CAIRN_DATABASE: "point --database at the database your application uses",
  INVALID_SPEC: "see `cairn --help`",
  UNSERIALIZABLE: "send plain JSON",
};

/** The single line printed for `error` (without the `cairn: ` prefix). */
export function describeError(error: unknown): string {
  if (error instanceof CliError) return oneLine(error.message);
  if (error instanceof CairnError) {
    const message = oneLine(error.message);
    if (message.includes(" — ")) return message;
    return `${message} — ${HINTS[error.code] ?? "see `cairn --help`"}`;
  }
  if (error instanceof Error) {
    return `unexpected ${error.name}: ${oneLine(error.message)} — this is a bug in cairn; please report it with the command you ran`;
  }
  return `unexpected failure: ${oneLine(String(error))} — this is a bug in cairn; please report it with the command you ran`;
}

export function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}
