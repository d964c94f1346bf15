// hunks.ts - the diff an inline edit shows, as pure functions on lines: a line diff of the
// original selection against its rewrite, grouped into hunks (a run of removed lines and the
// inserted lines that replace them), the lines the editor shows while each hunk is pending,
// accepted or rejected, and the text that results. No `vscode`: session.ts draws it.

export interface Hunk {
  /** Removed lines: original[origStart, origEnd). */
  origStart: number;
  origEnd: number;
  /** Inserted lines: rewrite[newStart, newEnd). */
  newStart: number;
  newEnd: number;
}

export type HunkState = 'pending' | 'accepted' | 'rejected';

/** Most differing lines the exact diff looks for; past it the changed middle is one hunk. */
const MAX_EDITS = 2000;

/** The hunks that turn `a` into `b`: Myers' shortest edit script on lines (the common head and
 * tail taken off first), each hunk one maximal run of differences. */
export function diffLines(a: readonly string[], b: readonly string[]): Hunk[] {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const n = a.length - head - tail;
  const m = b.length - head - tail;
  if (n === 0 && m === 0) return [];
  const whole = [{ origStart: head, origEnd: head + n, newStart: head, newEnd: head + m }];
  if (n === 0 || m === 0) return whole;
  const same = (x: number, y: number): boolean => a[head + x] === b[head + y];
  // v[k + max]: the furthest x on diagonal k (x - y = k); trace[d]: v after d edits.
  const max = Math.min(n + m, MAX_EDITS);
  const v = new Int32Array(2 * max + 2);
  const trace: Int32Array[] = [];
  let found = -1;
  for (let d = 0; d <= max && found < 0; d++) {
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[k - 1 + max]! < v[k + 1 + max]!) ? v[k + 1 + max]! : v[k - 1 + max]! + 1;
      let y = x - k;
      while (x < n && y < m && same(x, y)) {
        x++;
        y++;
      }
      v[k + max] = x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    trace.push(v.slice());
  }
  if (found < 0) return whole;
  // Walk back from the end: each step is one removed (x) or inserted (y) line.
  const removed = new Uint8Array(n);
  const inserted = new Uint8Array(m);
  let x = n;
  let y = m;
  for (let d = found; d > 0; d--) {
    const prev = trace[d - 1]!;
    const k = x - y;
    const down = k === -d || (k !== d && prev[k - 1 + max]! < prev[k + 1 + max]!);
    const pk = down ? k + 1 : k - 1;
    const px = prev[pk + max]!;
    const py = px - pk;
    while (x > px && y > py) {
      x--;
      y--;
    }
    if (down) inserted[py] = 1;
    else removed[px] = 1;
    x = px;
    y = py;
  }
  const hunks: Hunk[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && !removed[i] && !inserted[j]) {
      i++;
      j++;
      continue;
    }
    const h: Hunk = { origStart: head + i, origEnd: head + i, newStart: head + j, newEnd: head + j };
    while ((i < n && removed[i]) || (j < m && inserted[j])) {
      if (i < n && removed[i]) i++;
      else j++;
    }
    h.origEnd = head + i;
    h.newEnd = head + j;
    hunks.push(h);
  }
  return hunks;
}

export type ShownKind = 'same' | 'removed' | 'inserted';

export interface ShownLine {
  text: string;
  kind: ShownKind;
  /** The hunk the line belongs to; undefined for unchanged lines. */
  hunk?: number;
}

/** The lines the editor shows: unchanged lines once; a pending hunk as its removed lines then
 * its inserted ones; an accepted hunk as its inserted lines (plain); a rejected one as its
 * removed lines (plain). */
export function shownLines(a: readonly string[], b: readonly string[], hunks: readonly Hunk[], states: readonly HunkState[]): ShownLine[] {
  const out: ShownLine[] = [];
  let i = 0;
  hunks.forEach((h, k) => {
    for (; i < h.origStart; i++) out.push({ text: a[i]!, kind: 'same' });
    const state = states[k] ?? 'pending';
    if (state !== 'accepted') for (let x = h.origStart; x < h.origEnd; x++) out.push({ text: a[x]!, kind: state === 'pending' ? 'removed' : 'same', hunk: k });
    if (state !== 'rejected') for (let y = h.newStart; y < h.newEnd; y++) out.push({ text: b[y]!, kind: state === 'pending' ? 'inserted' : 'same', hunk: k });
    i = h.origEnd;
  });
  for (; i < a.length; i++) out.push({ text: a[i]!, kind: 'same' });
  return out;
}

/** The text once every hunk is decided: accepted hunks take the rewrite's lines, the rest keep
 * the original's. All accepted gives `b`, none gives `a`. */
export function applyHunks(a: readonly string[], b: readonly string[], hunks: readonly Hunk[], accepted: readonly boolean[]): string[] {
  return shownLines(
    a,
    b,
    hunks,
    hunks.map((_, k) => (accepted[k] ? 'accepted' : 'rejected')),
  ).map((l) => l.text);
}
