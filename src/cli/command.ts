import type { OptionSpec, ParsedArgs } from "./args.js";

/** What a command receives: its parsed arguments and the global options, resolved. */
export interface CommandContext {
  args: ParsedArgs;
  /** `--database`, else $CAIRN_DATABASE, else `cairn.db`. */
  database: string;
  json: boolean;
}

/** One `cairn <name>` command, in its own file under `commands/`. */
export interface Command {
  name: string;
  /** The arguments after `cairn <name>`, as shown in help: `<runId> [--key K]`. */
  usage: string;
  summary: string;
  /** Further help lines: what the arguments mean, an example. */
  help: string[];
  /** The command's own options (the global ones are added by main). */
  options: OptionSpec;
  /** Throws (a CliError, a CairnError) to fail with one line and exit code 1. */
  run(context: CommandContext): Promise<void>;
}
