// settings.ts - the one place that reads the `k3.*` settings declared in package.json.
import * as vscode from 'vscode';

export interface Settings {
  /** Model folder; empty means the embedded default model. */
  modelPath: string;
  /** Memory preset name. */
  preset: string;
}

export function readSettings(): Settings {
  const c = vscode.workspace.getConfiguration('k3');
  return {
    modelPath: c.get<string>('modelPath', ''),
    preset: c.get<string>('preset', 'auto'),
  };
}
