import type { Command } from "./command.js";
import { bold, dim } from "./style.js";

const GLOBAL_HELP = [
  "--database <path|url>   a SQLite file or a postgres:// URL (default: $CAIRN_DATABASE, else cairn.db)",
  "--json                  machine-readable output",
  "--help, -h              help for a command",
];

export function overallHelp(commands: readonly Command[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    `${bold("cairn")} — inspect and steer Cairn runs`,
    "",
    `${bold("usage:")} cairn <command> [arguments] [--database <path|url>] [--json]`,
    "",
    bold("commands:"),
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    "",
    bold("options (every command):"),
    ...GLOBAL_HELP.map((line) => `  ${line}`),
    "",
    dim("`cairn <command> --help` for a command's arguments. Start with `cairn demo`."),
  ].join("\n");
}

export function commandHelp(command: Command): string {
  return [
    `${bold("usage:")} cairn ${command.name}${command.usage === "" ? "" : ` ${command.usage}`}`,
    "",
    command.summary,
    ...(command.help.length === 0 ? [] : ["", ...command.help.map((line) => `  ${line}`)]),
    "",
    bold("options (every command):"),
    ...GLOBAL_HELP.map((line) => `  ${line}`),
  ].join("\n");
}
