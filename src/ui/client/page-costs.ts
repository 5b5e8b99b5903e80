import { get } from "./api.js";
import { barChart, dayChart } from "./charts.js";
import { add, h, usd } from "./dom.js";
import type { Params } from "./route.js";
import { table } from "./page-run.js";

interface Bucket {
  key: string;
  modelCalls: number;
  totalTokens: number;
  costUsd: number;
}

/** What the model calls cost, by agent, by model and by day. */
export async function costsPage(root: HTMLElement, _params: Params): Promise<void> {
  const report = await get<{ byAgent: Bucket[]; byModel: Bucket[]; byDay: Bucket[] }>("/costs");
  const items = (b: Bucket[]) => b.map((x) => ({ key: x.key, value: x.costUsd, label: `${usd(x.costUsd)} · ${x.totalTokens} tok` }));
  const total = report.byModel.reduce((sum, b) => sum + b.costUsd, 0);
  const calls = report.byModel.reduce((sum, b) => sum + b.modelCalls, 0);
  add(
    root,
    h("h1", {}, "Costs"),
    h("p", { "data-testid": "cost-total" }, `${usd(total)} over ${calls} model calls`),
    h(
      "div",
      { class: "grid3" },
      h("div", { class: "card", "data-testid": "by-agent" }, h("h2", {}, "By agent"), barChart(items(report.byAgent))),
      h("div", { class: "card", "data-testid": "by-model" }, h("h2", {}, "By model"), barChart(items(report.byModel))),
      h("div", { class: "card", "data-testid": "by-day" }, h("h2", {}, "By day (UTC)"), dayChart(items(report.byDay))),
    ),
    h("h2", {}, "By agent"),
    table(
      ["Agent", "Model calls", "Tokens", "Cost"],
      report.byAgent.map((b) => [b.key, String(b.modelCalls), String(b.totalTokens), usd(b.costUsd)]),
    ),
  );
}
