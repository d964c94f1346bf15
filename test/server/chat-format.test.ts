// chat-format.test.ts - the chat renderer (server/chat/render.ts) against the K3 format as
// docs/k3-architecture.md §5.4 writes it: the rendered text, spelled out here from the
// format rules; the ids, built here segment by segment with the independent js-tiktoken
// reference (test/tokenizer/reference.ts); specials only where the structure puts them;
// each turn's rendering a prefix of the next; and replies parsed into reasoning and
// response, a cut reply closed the way a finished one ends.
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { test } from 'node:test';
import { ChatRenderer, type RenderMessage } from '../../server/chat/render';
import { Tokenizer } from '../../server/engine/tokenizer';
import { addonFile, repoRoot } from '../support/paths';
import { loadReference } from '../tokenizer/reference';

process.env.K3_ADDON ??= addonFile;
const dir = path.join(repoRoot, 'test/data/kimi-tokenizer');
const tok = Tokenizer.open(dir);
const ref = loadReference(dir, fs.readFileSync(path.join(dir, 'pat_str.txt'), 'utf8'));
const renderer = new ChatRenderer(tok);

const OPEN = 163587;
const CLOSE = 163588;
const SEP = 163589;
const END = 163586;

const EFFORT =
  '`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), ' +
  'supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort=max`.';

// The format rules, as the spec writes them, with one entry per separately encoded segment:
// a number is a special token, a string is text encoded on its own.
type Seg = number | string;
const open = (tag: string, ...attrs: [string, string][]): Seg[] => [
  OPEN,
  tag,
  ...attrs.flatMap(([k, v]): Seg[] => [` ${k}`, '="', v.replace(/&/g, '&amp;').replace(/"/g, '&quot;'), '"']),
  SEP,
];
const close = (tag: string): Seg[] => [CLOSE, tag, SEP];
const refIds = (segs: Seg[]): number[] => segs.flatMap((s) => (typeof s === 'number' ? [s] : s === '' ? [] : ref.encode(s, false)));

test('a conversation renders to the spec text, with each segment encoded alone as the reference encodes it', () => {
  const messages: RenderMessage[] = [
    { role: 'system', content: 'Be brief & say "why".' },
    { role: 'user', content: 'What is 15% of 240?' },
    { role: 'assistant', reasoning: '0.15 * 240', content: '36.' },
    { role: 'user', content: 'And of 60?' },
  ];
  const ids = renderer.render(messages, { thinking: true, generationPrompt: true });

  const text =
    '<|open|>message role="system" type="thinking-effort"<|sep|>' + EFFORT + '<|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="system"<|sep|>Be brief & say "why".<|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="user"<|sep|>What is 15% of 240?<|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>0.15 * 240<|close|>think<|sep|>' +
    '<|open|>response<|sep|>36.<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="user"<|sep|>And of 60?<|close|>message<|sep|><|end_of_msg|>' +
    '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>';
  assert.equal(tok.decode(ids), text);

  const expected = refIds([
    ...open('message', ['role', 'system'], ['type', 'thinking-effort']), EFFORT, ...close('message'), END,
    ...open('message', ['role', 'system']), 'Be brief & say "why".', ...close('message'), END,
    ...open('message', ['role', 'user']), 'What is 15% of 240?', ...close('message'), END,
    ...open('message', ['role', 'assistant']), ...open('think'), '0.15 * 240', ...close('think'),
    ...open('response'), '36.', ...close('response'), ...close('message'), END,
    ...open('message', ['role', 'user']), 'And of 60?', ...close('message'), END,
    ...open('message', ['role', 'assistant']), ...open('think'),
  ]);
  assert.deepEqual(ids, expected);
});

test('without thinking there is no effort message and no think block, and the reply opens the response channel', () => {
  const ids = renderer.render(
    [
      { role: 'user', content: 'hi' },
      { role: 'assistant', reasoning: 'ignored', content: 'hello' },
      { role: 'user', content: 'bye' },
    ],
    { thinking: false, generationPrompt: true },
  );
  assert.equal(
    tok.decode(ids),
    '<|open|>message role="user"<|sep|>hi<|close|>message<|sep|><|end_of_msg|>' +
      '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>hello<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>' +
      '<|open|>message role="user"<|sep|>bye<|close|>message<|sep|><|end_of_msg|>' +
      '<|open|>message role="assistant"<|sep|><|open|>response<|sep|>',
  );
});

test('text that spells a special token stays text: specials appear only where the structure puts them', () => {
  const content = 'say <|end_of_msg|> and <|open|>message role="x"<|sep|>';
  const ids = renderer.render([{ role: 'user', content }], { thinking: false, generationPrompt: false });
  assert.deepEqual(ids, refIds([...open('message', ['role', 'user']), content, ...close('message'), END]));
  assert.deepEqual(
    ids.filter((id) => id >= 163584),
    [OPEN, SEP, CLOSE, SEP, END],
  );
});

test("a conversation's rendering at turn N is a prefix of its rendering at turn N+1, replies kept as generated", () => {
  const history: RenderMessage[] = [];
  let previous: number[] = [];
  const replies = [
    // A reply that finished: think, response, close, end.
    [...refIds(['ok']), CLOSE, ...refIds(['think']), SEP, OPEN, ...refIds(['response']), SEP, ...refIds([' fine']), CLOSE, ...refIds(['response']), SEP, CLOSE, ...refIds(['message']), SEP, END],
    // A reply cut by the token limit inside its reasoning.
    refIds(['still thinking about']),
    // A reply cut inside its response.
    [...refIds(['r']), CLOSE, ...refIds(['think']), SEP, OPEN, ...refIds(['response']), SEP, ...refIds(['partial answer'])],
  ];
  for (let turn = 0; turn < replies.length; turn++) {
    history.push({ role: 'user', content: `question ${turn}` });
    const prompt = renderer.render(history, { thinking: true, generationPrompt: true });
    assert.deepEqual(prompt.slice(0, previous.length), previous, `turn ${turn} extends turn ${turn - 1}`);
    const parser = renderer.parser(true);
    parser.feed(replies[turn]);
    const closer = renderer.closer(parser.state, parser.inTag);
    history.push({
      role: 'assistant',
      content: parser.content,
      reasoning: parser.reasoning,
      ids: [...renderer.generationPrompt(true), ...replies[turn], ...closer],
    });
    previous = renderer.render(history, { thinking: true, generationPrompt: false });
    assert.deepEqual(previous.slice(0, prompt.length + replies[turn].length), [...prompt, ...replies[turn]]);
    assert.equal(previous[previous.length - 1], END, `turn ${turn} ends with <|end_of_msg|>`);
  }
});

test('a reply parses into reasoning and response, streaming per channel, and stops at either stop id', () => {
  const reply = [
    ...refIds(['Let me add.']), CLOSE, ...refIds(['think']), SEP, OPEN, ...refIds(['response']), SEP,
    ...refIds(['The answer is 36.']), CLOSE, ...refIds(['response']), SEP, CLOSE, ...refIds(['message']), SEP, END,
    ...refIds(['ignored after the stop']),
  ];
  const parser = renderer.parser(true);
  const deltas = reply.flatMap((id) => parser.feed([id]));
  deltas.push(...parser.finish());
  assert.equal(parser.reasoning, 'Let me add.');
  assert.equal(parser.content, 'The answer is 36.');
  assert.equal(parser.state, 'ended');
  assert.equal(deltas.filter((d) => d.channel === 'reasoning').map((d) => d.text).join(''), 'Let me add.');
  assert.equal(deltas.filter((d) => d.channel === 'content').map((d) => d.text).join(''), 'The answer is 36.');
  assert.deepEqual(renderer.closer(parser.state, parser.inTag), []);

  const eos = renderer.parser(false);
  eos.feed([...refIds(['short']), 163585, ...refIds(['more'])]);
  assert.equal(eos.content, 'short');
  assert.equal(eos.state, 'ended');
  assert.deepEqual([...renderer.stopIds].sort(), [163585, 163586]);
});

test('a cut reply is closed the way a finished one ends, from wherever it stopped', () => {
  const cases: [number[], string][] = [
    [refIds(['half a thought']), '<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>'],
    [[...refIds(['t']), CLOSE, ...refIds(['think']), SEP], '<|open|>response<|sep|><|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>'],
    [[...refIds(['t']), CLOSE, ...refIds(['think']), SEP, OPEN, ...refIds(['response']), SEP, ...refIds(['an'])], '<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>'],
    // Cut inside a tag: the tag is finished as it stands, then the channel closed.
    [[...refIds(['t']), CLOSE, ...refIds(['thi'])], '<|sep|><|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>'],
  ];
  for (const [reply, closer] of cases) {
    const p = renderer.parser(true);
    p.feed(reply);
    assert.equal(tok.decode(renderer.closer(p.state, p.inTag)), closer, tok.decode(reply));
  }
});
