/**
 * The progress bar, on stderr (stdout stays for the table or --json): one line redrawn in place on
 * a terminal; elsewhere (a pipe, CI) a line per finished pass.
 */

import type { ExperimentObserver } from "../results.js";
import type { PassProgress } from "../pass-record.js";

const WIDTH = 20;

export class ProgressBar implements ExperimentObserver {
  private readonly tty = process.stderr.isTTY === true;
  private readonly started = Date.now();
  private label = "";
  private index = 0;
  private total = 1;
  private progress: PassProgress = { finished: 0, tasks: 1, faultsFired: 0, faults: 0 };
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly quiet = false) {}

  passStarted(label: string, index: number, total: number, progress: PassProgress): void {
    this.label = label;
    this.index = index;
    this.total = total;
    this.progress = progress;
    if (this.tty && !this.quiet) {
      this.draw();
      this.timer ??= setInterval(() => this.draw(), 250);
      this.timer.unref();
    }
  }

  passProgress(progress: PassProgress): void {
    this.progress = progress;
    if (this.tty && !this.quiet) this.draw();
  }

  passEnded(label: string, elapsedMs: number): void {
    if (this.quiet) return;
    const line = `pass ${this.index}/${this.total} ${label}: ${this.progress.finished}/${this.progress.tasks} tasks, ${this.progress.faultsFired}/${this.progress.faults} faults, ${(elapsedMs / 1000).toFixed(1)} s`;
    if (this.tty) process.stderr.write(`\r\u001b[2K${line}\n`);
    else process.stderr.write(`${line}\n`);
  }

  note(text: string): void {
    if (this.quiet) return;
    process.stderr.write(`${this.tty ? "\r\u001b[2K" : ""}${text}\n`);
  }

  done(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    if (this.tty && !this.quiet) process.stderr.write("\r\u001b[2K");
  }

  private draw(): void {
    // Whole passes done, plus this pass's share of finished tasks.
    const share = this.progress.tasks === 0 ? 0 : this.progress.finished / this.progress.tasks;
    const fraction = Math.min(1, (this.index - 1 + share) / this.total);
    const filled = Math.round(fraction * WIDTH);
    const bar = `${"█".repeat(filled)}${"░".repeat(WIDTH - filled)}`;
    const faults = this.progress.faults > 0 ? ` · ${this.progress.faultsFired}/${this.progress.faults} faults` : "";
    const elapsed = Math.round((Date.now() - this.started) / 1000);
    const line = `▕${bar}▏ ${this.index}/${this.total} ${this.label} · ${this.progress.finished}/${this.progress.tasks} tasks${faults} · ${Math.floor(elapsed / 60)}:${String(elapsed % 60).padStart(2, "0")}`;
    process.stderr.write(`\r\u001b[2K${line.slice(0, (process.stderr.columns ?? 100) - 1)}`);
  }
}
