// fuzzy.ts - the `@file` popup's matching: a query matches a path when its characters
// appear in it in order (case-insensitive); matches in the file name, at word starts and in
// runs rank first, then shorter paths. Pure, so a unit test holds the order.

/** The match's score (higher is better), or undefined when `query` is not a subsequence. */
export function fuzzyScore(query: string, path: string): number | undefined {
  const q = query.toLowerCase();
  const p = path.toLowerCase();
  if (q === '') return 0;
  const nameStart = p.lastIndexOf('/') + 1;
  // The whole query in the file name beats any match spread over the folders.
  const inName = nameStart > 0 ? fuzzyScore(query, path.slice(nameStart)) : undefined;
  if (inName !== undefined) return inName + 10 * q.length;
  let score = 0;
  let at = -1;
  let run = 0;
  for (const ch of q) {
    const i = p.indexOf(ch, at + 1);
    if (i < 0) return undefined;
    run = i === at + 1 ? run + 1 : 0;
    score += 1 + run * 2;
    if (i >= nameStart) score += 2;
    if (i === 0 || '/._-'.includes(p[i - 1])) score += 3;
    at = i;
  }
  return score;
}

/** The items whose key matches, best first (ties: the shorter key, then alphabetical). */
export function fuzzyRank<T>(query: string, items: readonly T[], key: (t: T) => string): T[] {
  const scored: { item: T; score: number; k: string }[] = [];
  for (const item of items) {
    const k = key(item);
    const score = fuzzyScore(query, k);
    if (score !== undefined) scored.push({ item, score, k });
  }
  scored.sort((a, b) => b.score - a.score || a.k.length - b.k.length || a.k.localeCompare(b.k));
  return scored.map((s) => s.item);
}
