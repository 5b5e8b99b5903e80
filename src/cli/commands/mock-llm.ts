import { type LoggedRequest, loadMockScript, type MockLlm, startMockLlm } from "../../testing/mock-llm/index.js";
import { integerOption, positionals, stringOption } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { print, printJson, truncate } from "../output.js";
import { dim } from "../style.js";

const DEFAULT_PORT = 4010;
const DEFAULT_SCRIPT = "builtin:refund";

export const mockLlm: Command = {
  name: "mock-llm",
  usage: "[--port 4010] [--script <file>|builtin:refund] [--latency-ms N] [--log <file>]",
  summary: "serve a scripted OpenAI-compatible model on 127.0.0.1, for tests and demos",
  help: [
    "--port N            the port (default 4010; 0 takes any free port)",
    "--script <file>     the rules that decide each answer, as JSON (format: src/testing/mock-llm/script.ts);",
    "                    default builtin:refund, a support agent that looks up an order, then refunds it",
    "--latency-ms N      wait N ms before every answer (overrides the script's latencyMs)",
    "--log <file>        append every request, as one JSON line, to <file>",
    "Point an OpenAI-compatible client at the printed URL. Answers are deterministic. Runs until",
    "Ctrl-C or SIGTERM.",
  ],
  options: { port: "string", script: "string", "latency-ms": "string", log: "string" },
  async run({ args, json }) {
    positionals(args, [], "mock-llm");
    const port = integerOption(args, "port", 0) ?? DEFAULT_PORT;
    if (port > 65535) throw new CliError(`--port must be at most 65535, not ${port}`, "for example --port 4010, or --port 0 for any free port");
    const latencyMs = integerOption(args, "latency-ms", 0);
    const log = stringOption(args, "log");
    const scriptSpec = stringOption(args, "script") ?? DEFAULT_SCRIPT;
    const script = await loadMockScript(scriptSpec);
    let server: MockLlm;
    try {
      server = await startMockLlm({
        port,
        script,
        ...(latencyMs === undefined ? {} : { latencyMs }),
        ...(log === undefined ? {} : { log }),
        ...(json ? {} : { onRequest: (request: LoggedRequest) => print(dim(describe(request))) }),
      });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
        throw new CliError(`port ${port} on 127.0.0.1 is in use`, "pick another with --port, or --port 0 for any free port");
      }
      throw error;
    }
    if (json) printJson({ url: server.url, port: server.port, script: scriptSpec, rules: script.rules.length });
    else print(`mock LLM listening on ${server.url} (script ${scriptSpec}, ${script.rules.length} rules); Ctrl-C stops it`);
    await untilSignal();
    await server.close();
  },
};

function untilSignal(): Promise<void> {
  return new Promise((resolve) => {
    const stop = (): void => {
      process.off("SIGINT", stop);
      process.off("SIGTERM", stop);
      resolve();
    };
    process.on("SIGINT", stop);
    process.on("SIGTERM", stop);
  });
}

/** `#3 mock-1 stream: tool "{\"totalCents\":4200}" → refund({"id":42,"amountCents":4200})` */
function describe(request: LoggedRequest): string {
  const last = request.lastMessage === null ? "(no messages)" : `${request.lastMessage.role} ${truncate(JSON.stringify(request.lastMessage.preview), 50)}`;
  const { reply } = request;
  let answer: string;
  if (reply.kind === "error") answer = `HTTP ${reply.status}: ${reply.message}`;
  else if (reply.kind === "malformed") answer = `malformed body (HTTP ${reply.status})`;
  else if (reply.toolCalls.length > 0) answer = reply.toolCalls.map((call) => `${call.name}(${call.arguments})`).join(", ");
  else answer = JSON.stringify(reply.content);
  return `#${request.n} ${request.model}${request.stream ? " stream" : ""}: ${last} → ${truncate(answer, 100)}`;
}
