#!/usr/bin/env node
import { findCommand, GLOBAL_OPTIONS, parseArgs } from "./args.js";
import { CliError, describeError } from "./cli-error.js";
import type { Command } from "./command.js";
import { approvals } from "./commands/approvals.js";
import { approve } from "./commands/approve.js";
import { cancel } from "./commands/cancel.js";
import { deleteCommand } from "./commands/delete.js";
import { gc } from "./commands/gc.js";
import { deny } from "./commands/deny.js";
import { demo } from "./commands/demo.js";
import { fork } from "./commands/fork.js";
import { mockLlm } from "./commands/mock-llm.js";
import { resume } from "./commands/resume.js";
import { runs } from "./commands/runs.js";
import { schedules } from "./commands/schedules.js";
import { send } from "./commands/send.js";
import { show } from "./commands/show.js";
import { sql } from "./commands/sql.js";
import { tree } from "./commands/tree.js";
import { why } from "./commands/why.js";
import { ui } from "./commands/ui.js";
import { executors } from "./commands/executors.js";
import { queues } from "./commands/queues.js";
import { databaseOf } from "./database.js";
import { commandHelp, overallHelp } from "./help.js";
import { print } from "./output.js";

const COMMANDS: readonly Command[] = [
  ...[runs, show, tree, why, sql, cancel, resume, fork, send, approvals, approve, deny, demo, mockLlm],
  ...[deleteCommand, gc],
  ui,
  ...[executors, queues],
  ...[schedules],
];

/** Runs the CLI on `argv` (without `node main.js`) and returns the exit code. */
async function main(argv: readonly string[]): Promise<number> {
  const { command: name, rest } = findCommand(argv);
  if (name === undefined || name === "help") {
    const topic = name === "help" ? rest.find((token) => !token.startsWith("-")) : undefined;
    if (topic === undefined) {
      parseArgs(rest, GLOBAL_OPTIONS, "");
      print(overallHelp(COMMANDS));
      return 0;
    }
    print(commandHelp(lookup(topic)));
    return 0;
  }
  const command = lookup(name);
  const args = parseArgs(rest, { ...GLOBAL_OPTIONS, ...command.options }, command.name);
  if (args.options.help === true) {
    print(commandHelp(command));
    return 0;
  }
  await command.run({ args, database: databaseOf(args), json: args.options.json === true });
  return 0;
}

function lookup(name: string): Command {
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined) {
    throw new CliError(`unknown command "${name}"`, `run \`cairn --help\` for the commands: ${COMMANDS.map((c) => c.name).join(", ")}`);
  }
  return command;
}

// A reader that stops early (`cairn runs | head`) is not an error.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(0);
  throw error;
});

main(process.argv.slice(2)).then(
  (code) => exit(code),
  (error: unknown) => {
    process.stderr.write(`cairn: ${describeError(error)}\n`);
    exit(1);
  },
);

/**
 * Sets the exit code and lets the event loop drain, so piped output is flushed. Should something
 * still hold the loop open (a database pool that failed to close), the process exits anyway, 2 s
 * after the output has reached the reader: writes to a pipe are asynchronous, and a timer armed at
 * once cut a slow reader's long listing short (`cairn show` of a 140,000-step run read by a busy
 * parent: nothing, or the journal up to some seq, and exit code 0).
 */
function exit(code: number): void {
  process.exitCode = code;
  // A write's callback runs once every write before it has been flushed.
  process.stdout.write("", () => setTimeout(() => process.exit(code), 2000).unref());
}
