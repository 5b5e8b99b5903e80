import { act } from "./actions.js";
import { get } from "./api.js";
import { duration, h, json, link, runLink, status, time, usd } from "./dom.js";
import type { Params } from "./route.js";
import { queueSection, type RunQueue } from "./run-queue.js";

interface Step {
  seq: number;
  name: string;
  kind: string;
  status: string;
  startedAtMs: number;
  finishedAtMs: number | null;
  durationMs: number | null;
  attempts: number;
  output: unknown;
  input: unknown;
  toolCallId: string | null;
  error: { name: string; message: string; code?: string; stack?: string } | null;
}

interface RunJson {
  id: string;
  workflow: string;
  status: string;
  createdAtMs: number;
  finishedAtMs: number | null;
  durationMs: number;
  recoveries: number;
  parentId: string | null;
  forkedFrom: string | null;
  forkedFromSeq: number | null;
  input: unknown;
  output: unknown;
  error: { name: string; message: string; stack?: string } | null;
  children: { id: string; workflow: string; status: string; parentSeq: number | null }[];
  journal: Step[];
  journalPage: { from: number; limit: number; total: number };
  events: { key: string; value: unknown; updatedAt: number }[];
  messages: { id: string; topic: string; body: unknown; sender: string | null; createdAt: number; consumedAt: number | null }[];
  modelCalls: { seq: number; modelId: string; totalTokens: number; costUsd: number; latencyMs: number }[];
  approvals: { toolCallId: string; toolName: string; status: string; decidedBy: string | null; reason: string | null }[];
  actions: { action: string; actor: string; detail: unknown; at: number }[];
  queue: RunQueue | null;
}

const FINISHED = ["succeeded", "failed", "cancelled"];

/** One run: its header and actions, the journal as a waterfall, children, events, messages, approvals, who did what. */
export async function runPage(root: HTMLElement, params: Params): Promise<() => void> {
  const runId = params.path[1]!;
  // A journal of more than a page (1,000 entries) is read a page at a time: `#/run/<id>?from=<seq>`.
  const from = Number(params.query.get("from") ?? 0) || 0;
  const open = new Set<number>();
  let shown = "";
  let stopped = false;

  async function render(): Promise<void> {
    const run = await get<RunJson>(`/runs/${encodeURIComponent(runId)}${from > 0 ? `?from=${from}` : ""}`);
    const signature = JSON.stringify([
      run.status,
      run.journal.length,
      run.journal.map((s) => s.status),
      run.approvals,
      run.actions.length,
      run.messages.length,
    ]);
    if (signature === shown || stopped) return;
    shown = signature;
    root.replaceChildren(...view(run));
  }

  function view(run: RunJson): Node[] {
    const end = run.finishedAtMs ?? Math.max(Date.now(), ...run.journal.map((s) => s.finishedAtMs ?? s.startedAtMs));
    const span = Math.max(1, end - run.createdAtMs);
    const byModel = new Map(run.modelCalls.map((m) => [m.seq, m]));
    const waterfall = h("div", { class: "waterfall card", "data-testid": "timeline" });
    for (const step of run.journal) {
      const left = ((step.startedAtMs - run.createdAtMs) / span) * 100;
      const width = (((step.finishedAtMs ?? end) - step.startedAtMs) / span) * 100;
      const detail = h("div", { class: "wf-detail", hidden: !open.has(step.seq) }, ...stepDetail(run, step, byModel.get(step.seq)));
      const rowEl = h(
        "div",
        {
          class: "wf-row",
          "data-seq": step.seq,
          onclick: () => {
            detail.hidden = !detail.hidden;
            if (detail.hidden) open.delete(step.seq);
            else open.add(step.seq);
          },
        },
        h("span", { class: "muted mono" }, `#${step.seq}`),
        h("span", {}, h("strong", {}, step.name), " ", h("span", { class: "muted" }, step.kind)),
        h(
          "div",
          { class: "wf-track" },
          h("div", {
            class: `wf-bar ${step.status === "succeeded" ? step.kind : step.status}`,
            style: `left:${left.toFixed(2)}%;width:${width.toFixed(2)}%`,
          }),
        ),
        h("span", { class: "muted" }, step.status === "succeeded" ? duration(step.durationMs) : step.status),
      );
      waterfall.append(rowEl, detail);
    }
    if (run.journal.length === 0) waterfall.append(h("p", { class: "muted" }, "No steps yet."));

    const actions = h("div", { class: "actions" });
    if (!FINISHED.includes(run.status)) {
      actions.append(
        h(
          "button",
          { class: "danger", onclick: () => void act("cancel", run.id, `Cancel run ${run.id} and its unfinished descendants.`).then(render) },
          "Cancel run",
        ),
      );
    }
    if (run.status === "failed" || run.status === "cancelled") {
      actions.append(h("button", { onclick: () => void act("resume", run.id, `Resume run ${run.id} from its journal.`).then(render) }, "Resume"));
    }
    actions.append(link(`#/tree/${encodeURIComponent(run.id)}`, "Supervision and delegation tree"));

    const pending = run.approvals.filter((a) => a.status === "pending");
    return [
      h(
        "h1",
        {},
        "Run ",
        h("span", { class: "mono" }, run.id),
        " ",
        status(run.status),
        FINISHED.includes(run.status) ? null : h("span", { class: "live" }, " ● live"),
      ),
      h(
        "div",
        { class: "card meta" },
        h("span", { class: "muted" }, "workflow"),
        h("span", {}, run.workflow),
        h("span", { class: "muted" }, "started"),
        h("span", {}, time(run.createdAtMs)),
        h("span", { class: "muted" }, "duration"),
        h("span", {}, duration(run.durationMs)),
        h("span", { class: "muted" }, "recoveries"),
        h("span", {}, String(run.recoveries)),
        run.parentId === null ? null : h("span", { class: "muted" }, "parent"),
        run.parentId === null ? null : h("span", {}, runLink(run.parentId)),
        run.forkedFrom === null ? null : h("span", { class: "muted" }, "forked from"),
        run.forkedFrom === null ? null : h("span", {}, runLink(run.forkedFrom), ` at seq ${run.forkedFromSeq}`),
        h("span", { class: "muted" }, "input"),
        json(run.input),
        run.status === "succeeded" ? h("span", { class: "muted" }, "output") : null,
        run.status === "succeeded" ? json(run.output) : null,
        run.error === null ? null : h("span", { class: "muted" }, "error"),
        run.error === null ? null : errorBox(run.error),
      ),
      ...queueSection(run.queue),
      actions,
      pending.length === 0 ? null : h("h2", {}, "Waiting for a person"),
      pending.length === 0
        ? null
        : h(
            "div",
            { class: "card" },
            ...pending.map((a) =>
              h(
                "div",
                { class: "actions", "data-approval": a.toolCallId },
                h("span", {}, h("strong", {}, a.toolName), " ", h("span", { class: "mono muted" }, a.toolCallId)),
                h(
                  "button",
                  {
                    class: "primary",
                    onclick: () =>
                      void act("approve", run.id, `Approve ${a.toolName} (${a.toolCallId}); the run goes on and runs the tool.`, {
                        toolCallId: a.toolCallId,
                      }).then(render),
                  },
                  "Approve",
                ),
                h(
                  "button",
                  {
                    class: "danger",
                    onclick: () =>
                      void act("deny", run.id, `Deny ${a.toolName} (${a.toolCallId}); the tool never runs and the model is told.`, {
                        toolCallId: a.toolCallId,
                      }).then(render),
                  },
                  "Deny",
                ),
              ),
            ),
          ),
      h("h2", {}, `Timeline (${run.journalPage.total} steps)`),
      journalPager(run),
      waterfall,
      run.children.length === 0 ? null : h("h2", {}, "Children"),
      run.children.length === 0
        ? null
        : table(
            ["Run", "Workflow", "Status", "Started by seq"],
            run.children.map((c) => [runLink(c.id), c.workflow, status(c.status), String(c.parentSeq ?? "")]),
          ),
      h("h2", {}, "Events"),
      run.events.length === 0
        ? h("p", { class: "muted" }, "None.")
        : table(
            ["Key", "Value", "Set"],
            run.events.map((e) => [e.key, json(e.value), time(e.updatedAt)]),
          ),
      h("h2", {}, "Messages"),
      run.messages.length === 0
        ? h("p", { class: "muted" }, "None.")
        : table(
            ["Topic", "Body", "Sender", "Sent", "Consumed"],
            run.messages.map((m) => [m.topic, json(m.body), m.sender ?? "", time(m.createdAt), time(m.consumedAt)]),
          ),
      run.approvals.length === 0 ? null : h("h2", {}, "Approvals"),
      run.approvals.length === 0
        ? null
        : table(
            ["Tool call", "Tool", "Status", "By", "Reason"],
            run.approvals.map((a) => [h("span", { class: "mono" }, a.toolCallId), a.toolName, status(a.status), a.decidedBy ?? "", a.reason ?? ""]),
          ),
      run.actions.length === 0 ? null : h("h2", {}, "Done from the dashboard"),
      run.actions.length === 0
        ? null
        : table(
            ["When", "Who", "Action", "Detail"],
            run.actions.map((a) => [time(a.at), a.actor, a.action, json(a.detail)]),
          ),
    ].filter((n): n is HTMLElement => n !== null);
  }

  function stepDetail(run: RunJson, step: Step, model: RunJson["modelCalls"][number] | undefined): Node[] {
    return [
      h(
        "div",
        { class: "meta" },
        h("span", { class: "muted" }, "started"),
        h("span", {}, time(step.startedAtMs)),
        h("span", { class: "muted" }, "attempts"),
        h("span", {}, String(step.attempts), step.attempts > 1 ? h("span", { class: "muted" }, ` (${step.attempts - 1} retried)`) : null),
        step.input === null ? null : h("span", { class: "muted" }, "input"),
        step.input === null ? null : json(step.input),
        step.status === "succeeded" ? h("span", { class: "muted" }, "output") : null,
        step.status === "succeeded" ? json(step.output) : null,
        step.error === null ? null : h("span", { class: "muted" }, "error"),
        step.error === null ? null : errorBox(step.error),
        model === undefined ? null : h("span", { class: "muted" }, "model"),
        model === undefined
          ? null
          : h("span", {}, `${model.modelId} · ${model.totalTokens} tokens · ${usd(model.costUsd)} · ${duration(model.latencyMs)}`),
      ),
      h(
        "div",
        { class: "actions" },
        model === undefined ? null : link(`#/model/${encodeURIComponent(run.id)}/${step.seq}`, "Model call"),
        step.kind === "tool" || model !== undefined ? link(`#/why/${encodeURIComponent(run.id)}/${step.seq}`, "Why?") : null,
        h(
          "button",
          {
            onclick: (e: Event) => {
              e.stopPropagation();
              void act("fork", run.id, `Start a new run of ${run.workflow} that reuses this journal below seq ${step.seq} and executes from it.`, {
                fromSeq: step.seq,
              }).then((r) => {
                if (r !== undefined && typeof r.forked === "string") location.hash = `#/run/${encodeURIComponent(r.forked)}`;
              });
            },
          },
          `Fork from #${step.seq}`,
        ),
      ),
    ];
  }

  await render();
  const timer = window.setInterval(() => void render().catch(() => undefined), 1000);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

/** Links to the journal's neighbouring pages, when it has more than one. */
function journalPager(run: RunJson): HTMLElement | null {
  const { from, limit, total } = run.journalPage;
  const last = run.journal.at(-1)?.seq;
  if (from === 0 && run.journal.length >= total) return null;
  const base = `#/run/${encodeURIComponent(run.id)}?from=`;
  return h(
    "div",
    { class: "actions" },
    h("span", { class: "muted" }, `steps from seq ${from}${last === undefined ? "" : ` to ${last}`} of ${total}`),
    from > 0 ? link(`${base}${Math.max(0, from - limit)}`, "← earlier steps") : null,
    last !== undefined && run.journal.length >= limit ? link(`${base}${last + 1}`, "later steps →") : null,
  );
}

function errorBox(error: { name: string; message: string; code?: string; stack?: string }): HTMLElement {
  return h(
    "div",
    { class: "error" },
    h("strong", {}, `${error.name}${error.code ? ` [${error.code}]` : ""}: `),
    error.message,
    error.stack ? h("pre", {}, error.stack) : null,
  );
}

export function table(head: string[], rows: (Node | string)[][]): HTMLElement {
  return h(
    "table",
    {},
    h("thead", {}, h("tr", {}, ...head.map((t) => h("th", {}, t)))),
    h("tbody", {}, ...rows.map((r) => h("tr", {}, ...r.map((c) => h("td", {}, c))))),
  );
}
