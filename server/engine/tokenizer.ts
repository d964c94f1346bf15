// tokenizer.ts - the checkpoint's tokenizer for server code, and the only way server code
// reaches it: a typed facade over the addon's Tokenizer (native/addon/addon.cc), which is
// the C engine's (native/src/tokenizer.c). Text becomes exactly the ids the model was
// trained on and back; no BOS is added. It does not render chat turns.
//
// Failures throw the addon's Errors: `code` is the engine status name ("io" for a missing
// file, "tokenizer" for a broken one, "token" for an id outside the vocabulary) and the
// message names the file, line or id. Calls are synchronous on the calling thread, except
// openAsync(), which reads the files on a worker thread and rejects with an EngineError
// (engine.ts) carrying the same code and status.
import { loadAddon, type NativeAddon } from './addon';
import { toEngineError } from './engine';

/** The addon's tokenizer object (new Tokenizer(dir) in addon.cc). */
export interface NativeTokenizer {
  readonly vocabSize: number;
  encode(text: string | Uint8Array, allowSpecial?: boolean): Int32Array;
  decode(ids: Int32Array | readonly number[]): string;
  decodeBytes(ids: Int32Array | readonly number[]): Uint8Array;
  specialId(name: string): number;
  tokenBytes(id: number): Uint8Array;
  lastPiece(text: string): number;
  close(): void;
}

/** The addon's streaming decoder (new TokenStream(tokenizer) in addon.cc). */
export interface NativeTokenStream {
  push(id: number): string;
  end(): string;
}

/** What addon.cc registers for the tokenizer, besides server/engine/addon.ts's exports. */
export interface NativeTokenizerExports {
  Tokenizer: new (dir: string) => NativeTokenizer;
  TokenStream: new (tokenizer: NativeTokenizer) => NativeTokenStream;
  /** The same as new Tokenizer(dir), read on a worker thread. */
  openTokenizer(dir: string): Promise<NativeTokenizer>;
}

/** Spellings of the special tokens the server names. */
export const SPECIAL_TOKENS = {
  bos: '[BOS]',
  eos: '[EOS]',
  endOfMessage: '<|end_of_msg|>',
  open: '<|open|>',
  close: '<|close|>',
  sep: '<|sep|>',
} as const;

/** Turns generated ids into text as they arrive, never splitting a character. */
export class TokenStream {
  constructor(private readonly native: NativeTokenStream) {}

  /** The text that token `id` completes (possibly ''). */
  push(id: number): string {
    return this.native.push(id);
  }

  /** What is still waiting (an incomplete character, as U+FFFD), and a fresh start. */
  end(): string {
    return this.native.end();
  }
}

export class Tokenizer {
  private constructor(private readonly native: NativeTokenizer) {}

  /** Loads dir/tiktoken.model and dir/tokenizer_config.json (a model directory). */
  static open(dir: string): Tokenizer {
    const addon = loadAddon() as NativeAddon & NativeTokenizerExports;
    return new Tokenizer(new addon.Tokenizer(dir));
  }

  /** Tokenizer.open() on a worker thread: the JS thread goes on while tiktoken.model is parsed. */
  static async openAsync(dir: string): Promise<Tokenizer> {
    const addon = loadAddon() as NativeAddon & NativeTokenizerExports;
    try {
      return new Tokenizer(await addon.openTokenizer(dir));
    } catch (e) {
      throw toEngineError(e);
    }
  }

  /** Ranks plus the 256 special slots (163,840 for K3). */
  get vocabSize(): number {
    return this.native.vocabSize;
  }

  /**
   * The ids of text (a string, or raw bytes that need not be UTF-8). With allowSpecial
   * (the release's default) the names of special tokens become their ids; pass false for
   * text from users or files, where "<|end_of_msg|>" must stay ordinary text.
   */
  encode(text: string | Uint8Array, allowSpecial = true): Int32Array {
    return this.native.encode(text, allowSpecial);
  }

  /** The text of ids; bytes that are not UTF-8 become U+FFFD. */
  decode(ids: Int32Array | readonly number[]): string {
    return this.native.decode(ids);
  }

  /** Exactly the bytes of ids. */
  decodeBytes(ids: Int32Array | readonly number[]): Uint8Array {
    return this.native.decodeBytes(ids);
  }

  /** The bytes of one token (a special's are its name). */
  tokenBytes(id: number): Uint8Array {
    return this.native.tokenBytes(id);
  }

  /** Where the text's last piece starts (UTF-16 offset): the K3 split pattern cuts text
   * into pieces BPE never merges across, and a prompt that ends at the start of its last
   * piece ends where typing more cannot move the boundary (token healing). */
  lastPiece(text: string): number {
    return this.native.lastPiece(text);
  }

  /** The engine's tokenizer object, for a generation that heals with it. */
  get handle(): NativeTokenizer {
    return this.native;
  }

  /** The id of the special token with this name, or undefined. */
  specialId(name: string): number | undefined {
    const id = this.native.specialId(name);
    return id < 0 ? undefined : id;
  }

  /** The ids that end a turn: "[EOS]" and "<|end_of_msg|>" (the release emits either). */
  stopIds(): number[] {
    return [SPECIAL_TOKENS.eos, SPECIAL_TOKENS.endOfMessage].flatMap((n) => this.specialId(n) ?? []);
  }

  /** A streaming decoder over this tokenizer. */
  stream(): TokenStream {
    const addon = loadAddon() as NativeAddon & NativeTokenizerExports;
    return new TokenStream(new addon.TokenStream(this.native));
  }

  /** Frees the engine's tokenizer now (otherwise at garbage collection); later calls throw. */
  close(): void {
    this.native.close();
  }
}
