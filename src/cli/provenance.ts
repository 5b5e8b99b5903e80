import type { ProvenanceLink } from "../observe/provenance.js";
import { formatUsage, formatUsd } from "./agent-fields.js";
import { formatDuration, formatTime, renderValue, truncate } from "./output.js";
import { bold, dim, status } from "./style.js";

/** Messages of the prompt shown as text; `--json` has them all. */
const SHOWN_MESSAGES = 3;

/** The chain for people: one block per link, each joined to the next by an arrow saying how. */
export function renderProvenance(runId: string, seq: number, chain: readonly ProvenanceLink[]): string {
  const lines = [dim(`why step ${seq} of run ${runId}`), ""];
  chain.forEach((link, i) => {
    if (i > 0) lines.push(`  ${dim("↑")} ${dim(arrow(chain[i - 1]!, link))}`);
    lines.push(...block(link));
  });
  return lines.join("\n");
}

/** How `cause` led to `effect`, read upwards: the effect ↑ was requested by the cause. */
function arrow(effect: ProvenanceLink, cause: ProvenanceLink): string {
  if (cause.kind === "model") return `requested by model call ${cause.seq}`;
  if (cause.kind === "prompt") return "after reading";
  if (cause.kind === "run" && effect.kind === "run") {
    const started = effect.startedBy;
    if (started === null || started.seq === null) return "started by";
    return `started by step ${started.seq}${started.name === null ? "" : ` (${started.name}${started.stepKind === null ? "" : `, ${started.stepKind}`})`} of`;
  }
  return "in";
}

const field = (label: string, value: string) => `              ${dim(label.padEnd(11))}${value}`;
const head = (label: string, value: string) => `${bold(label.padEnd(12))}  ${value}`;

function block(link: ProvenanceLink): string[] {
  switch (link.kind) {
    case "tool": {
      const decision =
        link.permission === "approve" && link.decidedBy !== null
          ? `, decided by ${link.decidedBy}${link.decidedAt === null ? "" : ` at ${formatTime(link.decidedAt)}`}`
          : "";
      return [
        head("tool call", `${bold(link.toolName)}  ${dim(`seq ${link.seq}, ${link.toolCallId}`)}`),
        field("input", link.input === null ? dim("-") : truncate(link.input, 100)),
        field("status", `${status(link.status)}, permission ${link.permission}${decision}`),
        ...(link.reason === null ? [] : [field("reason", truncate(link.reason, 100))]),
        ...(link.outputExcerpt === null ? [] : [field("output", truncate(link.outputExcerpt, 100))]),
      ];
    }
    case "model":
      return [
        head("model call", `${bold(`${link.provider} ${link.modelId}`)}  ${dim(`seq ${link.seq}`)}`),
        field("response", link.excerpt === null || link.excerpt === "" ? dim("(no text)") : truncate(link.excerpt, 100)),
        field("finish", link.finishReason ?? "-"),
        field(
          "usage",
          `${formatUsage(link.inputTokens, link.outputTokens, link.totalTokens)}, ${formatUsd(link.costUsd)}, ${formatDuration(link.latencyMs)}`,
        ),
      ];
    case "prompt": {
      const shown = link.messages.slice(-SHOWN_MESSAGES);
      const earlier = link.messages.length - shown.length;
      const count = `${link.messages.length} message${link.messages.length === 1 ? "" : "s"}`;
      return [
        head("prompt", `${count}${earlier === 0 ? "" : dim(`, the last ${shown.length} shown (--json for all)`)}`),
        ...shown.map((m) => field(m.role, truncate(m.excerpt, 100))),
      ];
    }
    case "step":
      return [
        head("step", `${bold(link.name)}  ${dim(`seq ${link.seq}, ${link.stepKind}`)}`),
        field("status", status(link.status)),
        link.error === null ? field("output", renderValue(link.output, 100)) : field("error", truncate(link.error, 100)),
      ];
    case "run":
      return [head("run", `${bold(link.runId)}  ${dim(`${link.workflow}, `)}${status(link.status)}`), field("input", renderValue(link.input, 100))];
  }
}
