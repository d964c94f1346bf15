// main.ts - the chat view's page script (runs in the sandboxed webview, not in Node).
// It renders what the extension posts and posts the user's messages back; it has no
// access to the engine or the file system.
interface VsCodeApi {
  postMessage(message: unknown): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscodeApi = acquireVsCodeApi();

function render(root: HTMLElement): void {
  const log = document.createElement('div');
  log.className = 'k3-log';
  const input = document.createElement('textarea');
  input.placeholder = 'Ask K3';
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) {
      e.preventDefault();
      vscodeApi.postMessage({ type: 'send', text: input.value });
      input.value = '';
    }
  });
  root.append(log, input);
}

render(document.body);
