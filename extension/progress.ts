// progress.ts - the load notification: cancellable, up from a restart, a preset switch or a
// load that lasts QUIET_LOAD_MS until the engine is past starting and loading (and no
// preset switch is under way), with the time so far and, when the engine reports them, the
// percentage and the time left. One at a time: a second request while it is up changes
// nothing. Cancelling it asks the host to stop the load; what that means is lifecycle.ts's.
import * as vscode from 'vscode';
import { formatDuration, type EngineView } from './status';

/** A load that ends sooner than this shows no notification, only the status bar. */
const QUIET_LOAD_MS = 1500;

export interface LoadNotificationHost {
  /** What the engine is doing now. */
  engine(): EngineView;
  /** The user cancelled the notification. */
  cancelLoad(): void;
}

export class LoadNotification implements vscode.Disposable {
  /** True while k3/presets/set runs: the load notification stays up even if no load shows yet. */
  presetSwitching = false;
  private readonly engineListeners = new Set<() => void>();
  private progressOpen = false;
  private quietLoadTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private readonly host: LoadNotificationHost) {}

  /** The engine's state changed (`wasLoading`: it was loading before): a load that begins
   * gets the notification if it lasts, and the open one is brought up to date. */
  engineChanged(wasLoading: boolean): void {
    if (this.host.engine().kind === 'loading' && !wasLoading) {
      clearTimeout(this.quietLoadTimer);
      this.quietLoadTimer = setTimeout(() => {
        if (this.host.engine().kind === 'loading') this.show('K3: loading the model');
      }, QUIET_LOAD_MS);
    }
    this.update();
  }

  /** Brings the open notification up to date, closing it when nothing loads any more. */
  update(): void {
    for (const l of [...this.engineListeners]) l();
  }

  /**
   * A cancellable notification from now until the engine is past starting and loading, with
   * the time so far and, when the engine reports them, the percentage and the time left.
   * Cancelling stops the server, which is what stops a load.
   */
  show(title: string, presetSwitch = false): void {
    if (presetSwitch) this.presetSwitching = true;
    if (this.progressOpen) return;
    this.progressOpen = true;
    const started = Date.now();
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title, cancellable: true },
      (progress, token) =>
        new Promise<void>((resolve) => {
          let reported = 0;
          let timer: ReturnType<typeof setInterval> | undefined;
          const finish = () => {
            clearInterval(timer);
            this.engineListeners.delete(update);
            this.progressOpen = false;
            resolve();
          };
          const update = () => {
            const e = this.host.engine();
            if (e.kind !== 'starting' && e.kind !== 'loading' && !this.presetSwitching) return finish();
            const parts = [`${formatDuration(Date.now() - started)} elapsed`];
            if (e.kind === 'loading' && e.etaMs !== undefined) parts.push(`about ${formatDuration(e.etaMs)} left`);
            let increment: number | undefined;
            if (e.kind === 'loading' && e.percent !== undefined && e.percent > reported) {
              increment = e.percent - reported;
              reported = e.percent;
            }
            progress.report({ message: parts.join(' · '), increment });
          };
          timer = setInterval(update, 1000);
          this.engineListeners.add(update);
          token.onCancellationRequested(() => {
            finish();
            this.host.cancelLoad();
          });
          update();
        }),
    );
  }

  dispose(): void {
    clearTimeout(this.quietLoadTimer);
  }
}
