import { Cairn } from "../../index.js";
import { DEFAULT_UI_PORT } from "../../ui/host.js";
import { integerOption, stringOption } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { openReadStore } from "../database.js";
import { print, printJson } from "../output.js";
import { dim } from "../style.js";

export const ui: Command = {
  name: "ui",
  usage: "[--port 4000] [--host 127.0.0.1] [--by name]",
  summary: "serve the dashboard: runs, timelines, model calls, why, approvals, costs, SQL",
  help: [
    `--port n      the port (default ${DEFAULT_UI_PORT}; 0 picks a free one)`,
    "--host addr   the interface to bind (default 127.0.0.1: this machine only); any other is",
    "              reachable from the network, and still needs the token",
    "--by name     who the dashboard's actions are recorded as (default: $USER, else ui); the page can say otherwise",
    "Prints the URL to open, with a token made for this start: without it the dashboard answers 401.",
    "Actions (cancel, resume, fork, approve, deny) ask first and are recorded with who took them.",
    "Runs until interrupted (Ctrl-C).",
  ],
  options: { port: "string", host: "string", by: "string" },
  async run({ args, database, json }) {
    const port = integerOption(args, "port", 0) ?? DEFAULT_UI_PORT;
    if (port > 65535) throw new CliError(`--port ${port} is not a port`, "give a port from 0 to 65535 (0 picks a free one)");
    const host = stringOption(args, "host");
    if (host === "") throw new CliError("--host is empty", "give an interface address, or leave --host out for 127.0.0.1");
    const by = stringOption(args, "by");
    if (by === "") throw new CliError("--by is empty", "name who acts, or leave --by out for $USER");
    // Checked read-only first: a Cairn migrates its database, and would turn any file into one.
    await (await openReadStore(database)).close();
    const cairn = new Cairn({ database, onError: () => undefined });
    let server;
    try {
      server = await cairn.ui({ port, ...(host === undefined ? {} : { host }), ...(by === undefined ? {} : { actor: by }) });
    } catch (error) {
      await cairn.shutdown();
      if ((error as NodeJS.ErrnoException).code === "EADDRINUSE")
        throw new CliError(`port ${port} is in use`, "pass another --port, or --port 0 for a free one");
      throw error;
    }
    if (json) printJson({ url: server.url });
    else {
      print(`Cairn dashboard: ${server.url}`);
      if (host !== undefined && host !== "127.0.0.1" && host !== "localhost" && host !== "::1") {
        print(dim(`listening on ${host}: reachable from other machines; the token in the URL is the only key`));
      }
      print(dim("Ctrl-C to stop"));
    }
    await new Promise<void>((resolve) => {
      process.once("SIGINT", resolve);
      process.once("SIGTERM", resolve);
    });
    await server.close();
    await cairn.shutdown();
  },
};
