// model-path.ts - which model folder the language server is given as `modelPath`. With the
// local backend an empty k3.modelPath means the embedded k3-mini. With the remote backend
// the folder is only the tokenizer prompts may be sent with, so it is the user's own
// k3.modelPath or nothing: k3-mini's tokenizer (8,448 tokens) is not a K3 server's, and its
// ids sent there were read as other text (issue 32). The server checks whatever it is
// given against the server's own tokenizer as well (server/remote/tokenizer-check.ts).
// It reads no settings itself and knows nothing of VS Code.

/** `configured`: k3.modelPath as set; `embedded`: k3-mini's folder ('' when not packaged). */
export function serverModelPath(backend: 'local' | 'remote', configured: string, embedded: string): string {
  if (configured) return configured;
  return backend === 'remote' ? '' : embedded;
}
