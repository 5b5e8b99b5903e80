import { positionals } from "../args.js";
import { CliError } from "../cli-error.js";
import type { Command } from "../command.js";
import { withReadStore } from "../database.js";
import { print, printJson } from "../output.js";
import { loadProvenance, NoSuchStepError, provenanceJson } from "../../observe/provenance.js";
import { renderProvenance } from "../provenance.js";

export const why: Command = {
  name: "why",
  usage: "<runId> <seq>",
  summary: "the provenance of a step: what caused it, link by link, up to the root run",
  help: [
    "A tool call ← the model response that requested it ← the prompt that model call read",
    "← the run ← the step of the parent run that started it ← ... up to the root run.",
    "For a model call: the response, its prompt, then the runs; for any other step: the step, then the runs.",
    "Example: cairn why ticket-42 5",
  ],
  options: {},
  async run({ args, database, json }) {
    const [runId, seqText] = positionals(args, ["runId", "seq"], "why");
    const seq = parseSeq(seqText!);
    const chain = await withReadStore(database, (store) => loadProvenance(store, runId!, seq)).catch((error: unknown) => {
      throw error instanceof NoSuchStepError ? noSuchStep(error) : error;
    });
    if (json) return printJson(provenanceJson(runId!, seq, chain));
    print(renderProvenance(runId!, seq, chain));
  },
};

function parseSeq(text: string): number {
  const seq = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(seq)) {
    throw new CliError(`<seq> must be an integer ≥ 0, not "${text}"`, "take it from the SEQ column of `cairn show <runId>`");
  }
  return seq;
}

function noSuchStep({ runId, seq, lastSeq }: NoSuchStepError): CliError {
  const range = lastSeq === null ? "it has no steps yet" : `its steps are seq 0 to ${lastSeq}`;
  return new CliError(`run ${runId} has no step at seq ${seq}`, `${range}; list them with \`cairn show ${runId}\``);
}
