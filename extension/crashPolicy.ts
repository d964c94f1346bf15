// crashPolicy.ts - what the extension does when the language server dies: asks restart.ts
// whether to restart (never after an out-of-memory or a missing model the server reported,
// never in a loop), stops the ghost text in flight, and says what happened: in the log and,
// when it does not restart, in a notification whose buttons are the ways out. The error
// handler in client.ts calls crashed() and acts on the decision.
import * as vscode from 'vscode';
import type { CompletionPolicy } from './completions';
import type { Notices } from './notices';
import { RestartPolicy, type CrashDecision, type KnownFailure } from './restart';
import type { EngineView } from './status';

export interface CrashHost {
  readonly output: vscode.LogOutputChannel;
  readonly completions: Pick<CompletionPolicy, 'cancelAll'>;
  setEngine(engine: EngineView): void;
}

export class CrashPolicy {
  /** Why the engine last failed, as the server reported it; a start forgets it. */
  knownFailure: KnownFailure;
  private readonly restarts = new RestartPolicy();

  constructor(
    private readonly host: CrashHost,
    private readonly notices: Notices,
  ) {}

  /** A deliberate restart (the user's command) starts counting crashes afresh. */
  reset(): void {
    this.restarts.reset();
  }

  /** The error handler's question: restart the dead server, or stop and show the action? */
  crashed(): CrashDecision {
    const decision = this.restarts.onCrash(Date.now(), this.knownFailure);
    this.host.completions.cancelAll();
    if (decision.restart) {
      this.host.output.error('The language server stopped unexpectedly; restarting it.');
      this.host.setEngine({ kind: 'starting' });
      return decision;
    }
    const sentences = {
      'out-of-memory': 'The engine ran out of memory. A smaller memory preset needs less.',
      'model-missing': 'The engine could not find its model.',
      'crash-loop': 'The engine crashed several times in a few minutes, so it was not restarted again.',
    } as const;
    const sentence = sentences[decision.reason];
    this.host.output.error(sentence);
    this.host.setEngine({ kind: 'stopped', reason: sentence });
    const actions =
      decision.reason === 'out-of-memory'
        ? ['Select Memory Preset', 'Show Logs']
        : decision.reason === 'model-missing'
          ? ['Select Model Folder', 'Show Logs']
          : ['Restart Engine', 'Show Logs'];
    void vscode.window.showErrorMessage(`K3: ${sentence}`, ...actions).then((pick) => this.notices.runPick(pick));
    return decision;
  }
}
