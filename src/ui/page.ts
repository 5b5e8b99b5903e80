/**
 * The dashboard's shell and style, served by the server itself: the page is a frame the compiled
 * modules (dist/ui/client/*.js, built from src/ui/client/) fill in. Nothing is loaded from
 * elsewhere, so it works offline.
 */
export function pageHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cairn</title>
<link rel="stylesheet" href="/assets/app.css">
</head>
<body>
<header>
  <a class="brand" href="#/runs">cairn</a>
  <nav>
    <a href="#/runs" data-nav="runs">Runs</a>
    <a href="#/approvals" data-nav="approvals">Approvals</a>
    <a href="#/costs" data-nav="costs">Costs</a>
    <a href="#/sql" data-nav="sql">SQL</a>
  </nav>
  <label class="actor">acting as <input id="actor" size="10" autocomplete="off"></label>
</header>
<main id="app"></main>
<script type="module" src="/assets/main.js"></script>
</body>
</html>`;
}

export const PAGE_CSS = `
:root { --fg: #1d2228; --muted: #68717c; --line: #dde2e7; --bg: #f7f8fa; --card: #fff; --accent: #2f6fdd;
  --ok: #1f8a4c; --bad: #c23b3b; --warn: #b7791f; --wait: #6b5bd6; --run: #2f6fdd; font-family: system-ui, sans-serif; font-size: 14px; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; gap: 24px; padding: 10px 20px; background: #14181d; color: #fff; }
header a { color: #c9d3de; text-decoration: none; }
header a.active, header a:hover { color: #fff; }
header nav { display: flex; gap: 16px; flex: 1; }
.brand { font-weight: 700; letter-spacing: .05em; color: #fff !important; }
.actor { color: #9aa7b4; font-size: 12px; }
.actor input { background: #232a31; color: #fff; border: 1px solid #39424c; border-radius: 4px; padding: 2px 6px; }
main { padding: 16px 20px 40px; max-width: 1400px; }
h1 { font-size: 18px; margin: 4px 0 12px; } h2 { font-size: 15px; margin: 20px 0 8px; }
a { color: var(--accent); }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; margin-bottom: 12px; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
pre { white-space: pre-wrap; word-break: break-word; margin: 4px 0; background: #f1f3f5; padding: 6px 8px; border-radius: 4px; max-height: 320px; overflow: auto; }
.filters { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; margin-bottom: 10px; }
select, input, button, textarea { font: inherit; }
input, select, textarea { border: 1px solid var(--line); border-radius: 4px; padding: 4px 6px; background: #fff; }
button { border: 1px solid var(--line); background: #fff; border-radius: 4px; padding: 4px 10px; cursor: pointer; }
button.primary { background: var(--accent); color: #fff; border-color: var(--accent); }
button.danger { background: var(--bad); color: #fff; border-color: var(--bad); }
.status { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 12px; color: #fff; background: var(--muted); }
.status.succeeded, .status.approved { background: var(--ok); } .status.failed, .status.denied { background: var(--bad); }
.status.running { background: var(--run); } .status.waiting, .status.pending { background: var(--wait); }
.status.cancelled { background: #888; } .status.enqueued { background: var(--warn); }
.muted { color: var(--muted); }
.meta { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; }
.actions { display: flex; gap: 8px; margin: 8px 0; }
.waterfall { width: 100%; }
.wf-row { display: grid; grid-template-columns: 44px 220px 1fr 80px; gap: 8px; align-items: center; padding: 3px 0; border-bottom: 1px solid var(--line); cursor: pointer; }
.wf-row:hover { background: #f1f5fb; }
.wf-track { position: relative; height: 14px; background: #f1f3f5; border-radius: 3px; }
.wf-bar { position: absolute; top: 2px; height: 10px; border-radius: 2px; min-width: 2px; background: var(--ok); }
.wf-bar.failed { background: var(--bad); } .wf-bar.pending { background: var(--wait); }
.wf-bar.model { background: #7a5af8; } .wf-bar.tool { background: #0e9384; } .wf-bar.child { background: #d97706; }
.wf-detail { padding: 6px 8px 10px 52px; border-bottom: 1px solid var(--line); background: #fbfcfd; }
.chain { list-style: none; padding: 0; margin: 0; }
.chain li { position: relative; padding: 10px 14px; margin: 0 0 18px; background: var(--card); border: 1px solid var(--line); border-radius: 6px; }
.chain li + li::before { content: "↑ caused by"; position: absolute; top: -17px; left: 14px; font-size: 11px; color: var(--muted); }
.chain .kind { font-weight: 600; text-transform: uppercase; font-size: 11px; color: var(--muted); margin-right: 6px; }
.msg { border-left: 3px solid var(--line); padding: 4px 10px; margin: 6px 0; }
.msg.delta { border-left-color: var(--accent); background: #f3f7fe; }
.msg .role { font-weight: 600; font-size: 12px; }
.tree { list-style: none; padding-left: 0; } .tree li { padding: 3px 0; }
.bars text { font-size: 11px; fill: var(--fg); }
.grid3 { display: grid; grid-template-columns: repeat(auto-fit, minmax(360px, 1fr)); gap: 12px; }
.modal-back { position: fixed; inset: 0; background: rgba(0,0,0,.35); display: flex; align-items: center; justify-content: center; }
.modal { background: #fff; border-radius: 8px; padding: 18px 20px; width: 420px; box-shadow: 0 10px 30px rgba(0,0,0,.25); }
.modal label { display: block; margin: 8px 0; } .modal input, .modal textarea { width: 100%; }
.error { color: var(--bad); }
.live { font-size: 12px; color: var(--ok); }
textarea.sql { width: 100%; height: 110px; }
`;
