// layout.ts - how a completion prompt is laid out (docs/PROMPTS.md, "Completions"). K3 has
// no fill-in-the-middle tokens, so for it a completion is a plain continuation of text
// ordered stable parts first (a model whose tokenizer names FIM tokens, as k3-mini v2's
// does, gets the text after the cursor as a FIM suffix block after part 1):
//   1. extra context: chunks of other documents, each "<comment> <path>\n<text>\n\n", oldest
//      first (they change rarely, so their checkpoint survives most keystrokes), then the
//      snippets the cursor uses (snippets.ts: they change when the lines above do);
//   2. the current file: "<comment> <path>\n" and its lines above the cursor's line, from a
//      window start that moves only in steps of WINDOW_STEP lines;
//   3. the cursor's line up to the cursor.
// Each part is encoded on its own, so the tokens of parts 1 and 2 do not change while the
// user types on the cursor's line, and the engine checkpoints the end of each part. The
// text after the cursor is not in the prompt: it is returned for stopping,
// post-processing and drafting. It does not run the engine.

/** A piece of another document. */
export interface ContextChunk {
  /** Identifies the chunk (document and region) in the ring. */
  key: string;
  /** Workspace-relative path (or file name) shown in the chunk's header. */
  path: string;
  languageId: string;
  text: string;
}

/** The special tokens of a model trained to fill in the middle (SPM order, below). */
export interface FimTokens {
  prefix: number;
  suffix: number;
  middle: number;
}

/** Their names in tokenizer_config.json; a model is FIM-capable when it names all three. */
export const FIM_NAMES = { prefix: '<|fim_prefix|>', suffix: '<|fim_suffix|>', middle: '<|fim_middle|>' } as const;

export interface LayoutInput {
  path: string;
  languageId: string;
  /** The whole document. */
  text: string;
  /** Cursor offset in text (UTF-16 units). */
  offset: number;
  chunks: readonly ContextChunk[];
  /** Snippets the cursor uses (snippets.ts), already fitted to their own budget; they follow
   * the chunks, which change less often. */
  snippets?: readonly ContextChunk[];
  maxPromptTokens: number;
  maxContextTokens: number;
  /** Back the cursor's line off to its last piece for token healing (a backend that heals
   * and an encoder with lastPiece). */
  heal?: boolean;
  /** Fill in the middle with these tokens (a model that has them); absent: plain layout. */
  fim?: FimTokens;
}

export interface Layout {
  ids: number[];
  /** Tokens of part 1 (extra context: the ring's chunks and the snippets). */
  contextEnd: number;
  /** Tokens up to the end of the FIM suffix block (contextEnd in the plain layout). */
  suffixEnd: number;
  /** True when the prompt fills in the middle. */
  fim: boolean;
  /** Tokens of parts 1 and 2: everything before the cursor's line. */
  stableEnd: number;
  /** Keys of the chunks that fit, then of the snippets. */
  chunkKeys: string[];
  /** The chunks those keys name, in prompt order (a backend that lays out its own prompt,
   * llama-server's /infill, sends them as they are). */
  chunks: ContextChunk[];
  /** The text of part 2, for cache keys. */
  fileText: string;
  linePrefix: string;
  /** Token healing: the end of linePrefix that the prompt leaves out (from the start of
   * its last piece), which the first generated tokens must spell again; '' when the
   * encoder cannot heal (a remote server's estimate). */
  heal: string;
  lineSuffix: string;
  /** The document's lines after the cursor's line (up to NEXT_LINES). */
  nextLines: string[];
  /** Drafting material: the line suffix and next lines, then the chunks. */
  draftIds: number[];
}

export interface Encoder {
  encode(text: string, allowSpecial: boolean): Int32Array;
  /** Where the text's last piece starts (the model's split pattern); present when the
   * backend heals tokens. */
  lastPiece?(text: string): number;
}

/** The prefix window starts on a multiple of this many lines. */
export const WINDOW_STEP = 32;
/** Lines after the cursor's line used for stopping and drafting. */
export const NEXT_LINES = 32;
/** Prompt tokens kept free for the cursor's line. */
const LINE_ALLOWANCE = 256;
/** The FIM suffix: the rest of the cursor's line and at most this many lines after it... */
export const FIM_SUFFIX_LINES = 16;
/** ...in at most this many tokens (whole lines dropped from its end until it fits). */
export const FIM_SUFFIX_TOKENS = 128;

const HASH_COMMENT = new Set([
  'python', 'shellscript', 'ruby', 'perl', 'r', 'yaml', 'toml', 'dockerfile', 'makefile', 'cmake',
  'powershell', 'elixir', 'julia', 'nim', 'coffeescript', 'properties', 'ini', 'gitignore', 'graphql',
]);
const DASH_COMMENT = new Set(['sql', 'lua', 'haskell', 'ada', 'elm', 'purescript']);
const PERCENT_COMMENT = new Set(['latex', 'tex', 'matlab', 'erlang', 'bibtex']);
const BLOCK_COMMENT: Record<string, [string, string]> = {
  html: ['<!--', '-->'],
  xml: ['<!--', '-->'],
  markdown: ['<!--', '-->'],
  vue: ['<!--', '-->'],
  svelte: ['<!--', '-->'],
  css: ['/*', '*/'],
  scss: ['/*', '*/'],
  less: ['/*', '*/'],
  json: ['//', ''],
};

/** The marker that starts a comment running to the end of the line in a language, or
 * undefined for a language that has none (HTML, XML, Markdown, CSS). */
export function lineComment(languageId: string): string | undefined {
  const block = BLOCK_COMMENT[languageId];
  if (block) return block[1] ? undefined : block[0];
  if (HASH_COMMENT.has(languageId)) return '#';
  if (DASH_COMMENT.has(languageId)) return '--';
  if (PERCENT_COMMENT.has(languageId)) return '%';
  if (languageId === 'clojure' || languageId === 'lisp' || languageId === 'scheme') return ';;';
  return '//';
}

/** The header line naming a file, as a comment of its language. */
export function header(path: string, languageId: string): string {
  const block = BLOCK_COMMENT[languageId];
  if (block && block[1]) return `${block[0]} ${path} ${block[1]}\n`;
  return `${lineComment(languageId)} ${path}\n`;
}

/** A context chunk's prompt text. */
export function chunkText(c: ContextChunk): string {
  const body = c.text.endsWith('\n') ? c.text : `${c.text}\n`;
  return `${header(c.path, c.languageId)}${body}\n`;
}

/** Lines of a text, without their line breaks (\n or \r\n). */
export function splitLines(text: string): string[] {
  return text.split(/\r?\n/);
}

/**
 * The ids of the FIM suffix: the text after the cursor, `lineSuffix` and the lines after it
 * (`below`), joined with line breaks; at most FIM_SUFFIX_LINES lines after the cursor's and
 * FIM_SUFFIX_TOKENS tokens, whole lines dropped from the end until it fits (the first line
 * alone cut to its first FIM_SUFFIX_TOKENS tokens). training/ builds its examples the same
 * way: keep the two in step.
 */
export function fimSuffixIds(enc: Encoder, lineSuffix: string, below: readonly string[]): Int32Array {
  let lines = [lineSuffix, ...below.slice(0, FIM_SUFFIX_LINES)];
  let ids = enc.encode(lines.join('\n'), false);
  while (ids.length > FIM_SUFFIX_TOKENS && lines.length > 1) {
    lines = lines.slice(0, -1);
    ids = enc.encode(lines.join('\n'), false);
  }
  return ids.length > FIM_SUFFIX_TOKENS ? ids.slice(0, FIM_SUFFIX_TOKENS) : ids;
}

export function layoutPrompt(enc: Encoder, input: LayoutInput): Layout {
  const before = input.text.slice(0, input.offset);
  const after = input.text.slice(input.offset);
  const above = splitLines(before);
  const linePrefix = above.pop() ?? '';
  const below = splitLines(after);
  const lineSuffix = below.shift() ?? '';
  const nextLines = below.slice(0, NEXT_LINES);

  // 1. extra context, oldest first, while it fits its budget.
  const ids: number[] = [];
  const chunkKeys: string[] = [];
  const chunks: ContextChunk[] = [];
  const chunkIds: number[] = [];
  for (const c of input.chunks) {
    const t = enc.encode(chunkText(c), false);
    if (chunkIds.length + t.length > input.maxContextTokens) break;
    for (const id of t) chunkIds.push(id);
    chunkKeys.push(c.key);
    chunks.push(c);
  }
  ids.push(...chunkIds);
  // 1, continued: the snippets, each encoded alone (their budget was kept by fitSnippets). A
  // snippet is left out when its text is already in a ring chunk. No checkpoint between the
  // two: the snippets change when the lines above the cursor do, and then part 2, which is
  // larger than the ring, is read again anyway.
  for (const c of input.snippets ?? []) {
    if (input.chunks.some((r) => chunkKeys.includes(r.key) && r.text.includes(c.text))) continue;
    const t = enc.encode(chunkText(c), false);
    chunkIds.push(...t);
    ids.push(...t);
    chunkKeys.push(c.key);
    chunks.push(c);
  }
  const contextEnd = ids.length;

  // 1b. Fill in the middle: the text after the cursor comes before the file (the SPM order
  // of Bavarian et al. 2022), so typing at the cursor still extends a checkpointed prompt.
  if (input.fim) {
    const f = input.fim;
    ids.push(f.prefix, f.suffix, ...fimSuffixIds(enc, lineSuffix, below), f.middle);
  }
  const suffixEnd = ids.length;

  // 3 first, to know what is left for 2. The line ends at the start of its last piece:
  // a prompt ending in the middle of a token ("    ret") is a sequence the model never
  // saw, so the engine regenerates that piece under a byte-prefix constraint instead.
  const cut = input.heal && enc.lastPiece && linePrefix !== '' ? enc.lastPiece(linePrefix) : linePrefix.length;
  const heal = linePrefix.slice(cut);
  const lineIds = enc.encode(linePrefix.slice(0, cut), false);
  const head = header(input.path, input.languageId);
  // A fixed allowance for the line, so typing on it does not move the window.
  const lineAllowance = Math.max(lineIds.length, Math.min(LINE_ALLOWANCE, Math.floor(input.maxPromptTokens / 8)));
  const budget = Math.max(0, input.maxPromptTokens - suffixEnd - lineAllowance);

  // 2. the file above the cursor's line: from an anchored window start that fits.
  const fileAt = (start: number): string => head + above.slice(start).map((l) => `${l}\n`).join('');
  let start = 0;
  // Estimate first (about 3 characters per token), then check exactly.
  let chars = 0;
  for (let i = above.length - 1; i >= 0; i--) {
    chars += above[i].length + 1;
    if (chars / 3 > budget) {
      start = i + 1;
      break;
    }
  }
  start = Math.floor(start / WINDOW_STEP) * WINDOW_STEP;
  let fileText = fileAt(start);
  let fileIds = enc.encode(fileText, false);
  while (fileIds.length > budget && start < above.length) {
    start = Math.min(above.length, start + WINDOW_STEP);
    fileText = fileAt(start);
    fileIds = enc.encode(fileText, false);
  }
  if (fileIds.length > budget) {
    fileText = '';
    fileIds = new Int32Array(0);
  }
  ids.push(...fileIds);
  const stableEnd = ids.length;
  ids.push(...lineIds);

  const draftIds = [...enc.encode([lineSuffix, ...nextLines].join('\n'), false), ...chunkIds];
  return { ids, contextEnd, suffixEnd, fim: input.fim !== undefined, stableEnd, chunkKeys, chunks, fileText, linePrefix, heal, lineSuffix, nextLines, draftIds };
}
