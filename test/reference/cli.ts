// cli.ts - the `npm run reference` command line:
//   npm run reference -- DIR --ids 1,2,3 --gen 8 --out ref.json [--mistake NAME]
// Greedy-decodes --gen tokens after the prompt ids with the reference model by full
// recompute, and writes {prompt, generated, margins, logits} as JSON, where logits[i] are
// the logits generated[i] was chosen from. It adds nothing to the math (model.ts).
import * as fs from 'node:fs';
import { MISTAKES, type Mistake } from './mistakes';
import { greedy, loadReferenceModel } from './model';

const USAGE = 'usage: npm run reference -- DIR --ids 1,2,3 --gen 8 --out ref.json [--mistake NAME]';

interface Args {
  dir: string;
  ids: number[];
  gen: number;
  out: string;
  mistake?: Mistake;
}

function parseArgs(argv: string[]): Args {
  const values = new Map<string, string>();
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    if (!argv[i].startsWith('--')) {
      positional.push(argv[i]);
      continue;
    }
    if (!['--ids', '--gen', '--out', '--mistake'].includes(argv[i])) throw new Error(`unknown argument ${argv[i]}`);
    if (argv[i + 1] === undefined) throw new Error(`${argv[i]} needs a value`);
    values.set(argv[i], argv[++i]);
  }
  if (positional.length !== 1) throw new Error('exactly one checkpoint DIR is required');
  const idsText = values.get('--ids') ?? '';
  if (!/^\d+(,\d+)*$/.test(idsText)) throw new Error(`--ids must be comma-separated token ids, got ${JSON.stringify(idsText)}`);
  const genText = values.get('--gen') ?? '8';
  if (!/^\d+$/.test(genText)) throw new Error(`--gen must be a non-negative integer, got ${JSON.stringify(genText)}`);
  const out = values.get('--out');
  if (!out) throw new Error('--out FILE is required');
  const mistake = values.get('--mistake');
  if (mistake !== undefined && !(MISTAKES as readonly string[]).includes(mistake)) {
    throw new Error(`unknown mistake ${mistake}: expected one of ${MISTAKES.join(', ')}`);
  }
  return { dir: positional[0], ids: idsText.split(',').map(Number), gen: Number(genText), out, mistake: mistake as Mistake | undefined };
}

function main(argv: string[]): number {
  let args: Args;
  try {
    args = parseArgs(argv);
  } catch (e) {
    console.error(`reference: ${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  try {
    const model = loadReferenceModel(args.dir);
    const r = greedy(model, args.ids, args.gen, { mistake: args.mistake });
    const json = {
      prompt: args.ids,
      generated: r.generated,
      margins: r.margins,
      mistake: args.mistake ?? null,
      logits: r.logits.map((l) => Array.from(l)),
    };
    fs.writeFileSync(args.out, JSON.stringify(json) + '\n');
    console.log(`reference: ${args.ids.length} prompt ids -> generated ${r.generated.join(',')} (${args.out})`);
    return 0;
  } catch (e) {
    console.error(`reference: ${(e as Error).message}`);
    return 1;
  }
}

process.exitCode = main(process.argv.slice(2));
