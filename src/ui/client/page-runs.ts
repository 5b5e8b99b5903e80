import { get } from "./api.js";
import { duration, h, runLink, status, time } from "./dom.js";
import type { Params } from "./route.js";

interface RunSummary {
  id: string;
  workflow: string;
  status: string;
  parentId: string | null;
  createdAt: number;
  updatedAt: number;
  finishedAt: number | null;
  recoveries: number;
}

const POLL_MS = 2000;

/** The run list: filters in the address (so a filtered view can be shared), newest first, live. */
export async function runsPage(root: HTMLElement, params: Params): Promise<() => void> {
  // The filters' choices arrive beside the first page, not before it.
  const filtersRead = get<{ workflows: string[]; agents: string[]; queues: string[]; statuses: string[] }>("/filters");
  const filters = {
    statuses: ["enqueued", "running", "waiting", "succeeded", "failed", "cancelled"],
    workflows: [] as string[],
    agents: [] as string[],
    queues: [] as string[],
  };
  const state = {
    status: params.query.get("status") ?? "",
    workflow: params.query.get("workflow") ?? "",
    agent: params.query.get("agent") ?? "",
    queue: params.query.get("queue") ?? "",
    q: params.query.get("q") ?? "",
  };
  const select = (name: keyof typeof state, label: string, values: string[], extra: [string, string][] = []) =>
    h(
      "select",
      { name, "aria-label": label, onchange: (e: Event) => update(name, (e.target as HTMLSelectElement).value) },
      h("option", { value: "" }, `${label}: all`),
      ...extra.map(([v, text]) => h("option", { value: v, selected: state[name] === v }, text)),
      ...values.map((v) => h("option", { value: v, selected: state[name] === v }, v)),
    );
  const search = h("input", { type: "search", name: "q", placeholder: "run id starts with…", value: state.q }) as HTMLInputElement;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = window.setTimeout(() => update("q", search.value.trim()), 250);
  });
  let typing = 0;
  const info = h("span", { class: "muted", "data-testid": "runs-info" });
  const live = h("span", { class: "live" }, "● live");
  const body = h("tbody");
  const more = h("button", { onclick: () => void load(true) }, "Older runs");
  let next: string | null = null;
  let stopped = false;

  root.append(
    h("h1", {}, "Runs"),
    h(
      "div",
      { class: "filters" },
      select("status", "Status", filters.statuses),
      select("workflow", "Workflow", filters.workflows),
      select("agent", "Agent", filters.agents, [["*", "any agent"]]),
      select("queue", "Queue", filters.queues),
      search,
      info,
      live,
    ),
    h(
      "table",
      { "data-testid": "runs" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, "Run"),
          h("th", {}, "Workflow"),
          h("th", {}, "Status"),
          h("th", {}, "Started"),
          h("th", { class: "num" }, "Duration"),
          h("th", {}, "Parent"),
        ),
      ),
      body,
    ),
    h("div", { class: "actions" }, more),
  );

  function update(name: keyof typeof state, value: string): void {
    state[name] = value;
    const query = new URLSearchParams(Object.entries(state).filter(([, v]) => v !== ""));
    history.replaceState(null, "", `#/runs${query.size > 0 ? `?${query}` : ""}`);
    void load(false);
  }

  function row(run: RunSummary): HTMLElement {
    const end = run.finishedAt ?? (["succeeded", "failed", "cancelled"].includes(run.status) ? run.updatedAt : Date.now());
    return h(
      "tr",
      { "data-run": run.id },
      h("td", {}, runLink(run.id)),
      h("td", {}, run.workflow),
      h("td", {}, status(run.status)),
      h("td", {}, time(run.createdAt)),
      h("td", { class: "num" }, duration(end - run.createdAt)),
      h("td", {}, run.parentId === null ? "" : runLink(run.parentId)),
    );
  }

  let generation = 0;
  async function load(append: boolean): Promise<void> {
    const mine = ++generation;
    const query = new URLSearchParams(Object.entries(state).filter(([, v]) => v !== ""));
    if (append && next !== null) query.set("after", next);
    const started = performance.now();
    const page = await get<{ runs: RunSummary[]; next: string | null }>(`/runs?${query}`);
    if (mine !== generation || stopped) return;
    if (!append) body.replaceChildren();
    body.append(...page.runs.map(row));
    if (body.children.length === 0) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No runs match.")));
    next = page.next;
    more.hidden = next === null;
    info.textContent = `${body.querySelectorAll("tr[data-run]").length} shown · ${Math.round(performance.now() - started)} ms`;
  }

  const [choices] = await Promise.all([filtersRead, load(false)]);
  for (const [name, label, values, extra] of [
    ["workflow", "Workflow", choices.workflows, []],
    ["agent", "Agent", choices.agents, [["*", "any agent"] as [string, string]]],
    // A queue named in the address but declared by no code (enqueued by plain SQL) stays choosable.
    ["queue", "Queue", state.queue !== "" && !choices.queues.includes(state.queue) ? [...choices.queues, state.queue] : choices.queues, []],
  ] as const) {
    root.querySelector(`select[name="${name}"]`)!.replaceWith(select(name, label, values, [...extra]));
  }
  // Live: the first page is read again every two seconds (a page the reader paged past is left alone).
  const timer = window.setInterval(() => {
    if (body.querySelectorAll("tr[data-run]").length <= 50) void load(false).catch(() => (live.textContent = "○ offline"));
  }, POLL_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
