import { act } from "./actions.js";
import { get } from "./api.js";
import { add, h, json, runLink, time } from "./dom.js";
import type { Params } from "./route.js";

interface Pending {
  runId: string;
  toolCallId: string;
  kind: string;
  toolName: string;
  input: unknown;
  requestedAt: number;
  workflow: string;
}

/** The inbox: every tool call (and budget raise) waiting for a person, oldest first, with approve and deny. */
export async function approvalsPage(root: HTMLElement, _params: Params): Promise<() => void> {
  const body = h("tbody");
  add(
    root,
    h("h1", {}, "Approvals waiting"),
    h(
      "table",
      { "data-testid": "approvals" },
      h("thead", {}, h("tr", {}, ...["Run", "Workflow", "Tool", "Input", "Requested", ""].map((t) => h("th", {}, t)))),
      body,
    ),
  );
  let shown = "";
  async function render(): Promise<void> {
    const { pending } = await get<{ pending: Pending[] }>("/approvals");
    const signature = JSON.stringify(pending.map((p) => [p.runId, p.toolCallId]));
    if (signature === shown) return;
    shown = signature;
    body.replaceChildren(
      ...pending.map((p) =>
        h(
          "tr",
          { "data-approval": p.toolCallId },
          h("td", {}, runLink(p.runId)),
          h("td", {}, p.workflow),
          h("td", {}, h("strong", {}, p.toolName), p.kind === "budget" ? " (budget)" : "", h("div", { class: "mono muted" }, p.toolCallId)),
          h("td", {}, json(p.input)),
          h("td", {}, time(p.requestedAt)),
          h(
            "td",
            {},
            h(
              "div",
              { class: "actions" },
              h(
                "button",
                {
                  class: "primary",
                  onclick: () =>
                    void act("approve", p.runId, `Approve ${p.toolName} in run ${p.runId}; the run goes on and runs the tool.`, {
                      toolCallId: p.toolCallId,
                    }).then(render),
                },
                "Approve",
              ),
              h(
                "button",
                {
                  class: "danger",
                  onclick: () =>
                    void act("deny", p.runId, `Deny ${p.toolName} in run ${p.runId}; the tool never runs and the model is told why.`, {
                      toolCallId: p.toolCallId,
                    }).then(render),
                },
                "Deny",
              ),
            ),
          ),
        ),
      ),
    );
    if (pending.length === 0) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "Nothing waits for a person.")));
  }
  await render();
  const timer = window.setInterval(() => void render().catch(() => undefined), 2000);
  return () => clearInterval(timer);
}
