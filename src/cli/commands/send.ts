import { positionals, stringOption } from "../args.js";
import { CliError, oneLine } from "../cli-error.js";
import type { Command } from "../command.js";
import { withClient } from "../database.js";
import { print, printJson, truncate } from "../output.js";
import { dim } from "../style.js";

export const send: Command = {
  name: "send",
  usage: "<runId> <topic> <json> [--key idempotencyKey]",
  summary: "send a message to a run (it receives it with ctx.recv(topic))",
  help: [
    `<json>                 the message, as JSON; quote it for your shell: '{"approved": true}'`,
    "--key idempotencyKey   a second send with the same key inserts nothing",
    "A message to a finished run is stored, but only a failed or cancelled run that is resumed can still receive it.",
  ],
  options: { key: "string" },
  async run({ args, database, json }) {
    const [runId, topic, text] = positionals(args, ["runId", "topic", "json"], "send");
    const value = parseJson(text!);
    const key = stringOption(args, "key");
    if (key === "") throw new CliError("--key is empty", "give a non-empty idempotency key, or leave --key out");
    const status = await withClient(database, async (cairn) => {
      await cairn.send(runId!, topic!, value, key === undefined ? {} : { idempotencyKey: key });
      return (await cairn.run(runId!).status()).status;
    });
    if (json) return printJson({ runId, topic, sent: true, idempotencyKey: key ?? null, runStatus: status });
    print(`sent to run ${runId} on "${topic}"${key === undefined ? "" : ` (idempotency key ${key})`}`);
    // Not an error: retrying a send with its key after the run finished must succeed.
    if (status === "succeeded") print(dim(`note: run ${runId} already succeeded; nothing will receive this message`));
  },
};

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const reason = error instanceof Error ? oneLine(error.message) : String(error);
    throw new CliError(
      `malformed JSON message ${truncate(JSON.stringify(text), 40)}: ${reason}`,
      `quote it for your shell, e.g. '{"approved": true}' or '"text"'`,
    );
  }
}
