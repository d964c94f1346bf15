// presets.ts - the memory preset quick pick's items: every preset with its budgets, set
// against the loaded model's size (how much of it each holds, and whether that fits the
// memory this machine has available now; a model that fits whole in every preset is said
// to once, in the picker's placeholder), the recommended one marked, and the engine's
// forecast of seconds per token (and to the first token of a 2,048-token prompt) for the full
// K3 when this machine has been measured, with
// how far it missed where it was checked (the worst miss beside it, the whole check in the
// detail). Without a model, the full K3's peak is shown. Pure except availableMemoryBytes(), which
// reads the OS.
// The presets, their budgets and peak memory come from the engine's preset table through
// k3/presets/list, the only list the picker shows; a preset it gives no budgets for (auto,
// mapped) is described, not guessed. `auto`, which sizes itself from free memory, is the
// recommended one.
import * as fs from 'node:fs';
import * as os from 'node:os';

/** What the engine reports about one preset. */
export interface PresetFacts {
  /** Resident trunk budget, bytes. */
  trunkBytes: number;
  /** Expert cache budget, bytes. */
  expertCacheBytes: number;
  /** Peak memory the engine needs with this preset at full scale (the released K3), bytes. */
  peakBytes: number;
  /** The engine's forecast of seconds per token at full scale on this machine (measured
   * memory bandwidth and disk speed); undefined until the machine has been measured. */
  secondsPerToken?: number;
  /** How the forecast did where this machine was measured: `within` of `configurations`
   * configurations of a K3-width slice within 15 %, the largest miss `worst` (a fraction). */
  forecastCheck?: { configurations: number; within: number; worst: number };
  /** The engine's forecast of seconds to the first token of a prompt of `tokens` tokens
   * (512 and 2,048) at full scale on this machine; undefined with secondsPerToken. */
  firstTokenSeconds?: { tokens: number; seconds: number }[];
}

/** The loaded model, as k3/status describes it. */
export interface PresetModel {
  name: string;
  /** Bytes of its weights. */
  bytes: number;
}

export interface PresetItem {
  /** The preset name, as the `k3.preset` setting spells it. */
  preset: string;
  label: string;
  description: string;
  detail: string;
}

/** "0.42 s", "26 s", "3.1 min". */
export function formatSeconds(s: number): string {
  if (s >= 120) return `${(s / 60).toFixed(1)} min`;
  if (s >= 10) return `${s.toFixed(0)} s`;
  return `${s.toFixed(2)} s`;
}

export function formatBytes(n: number): string {
  const gib = n / 2 ** 30;
  if (gib >= 10) return `${gib.toFixed(0)} GiB`;
  if (gib >= 1) return `${gib.toFixed(1)} GiB`;
  return `${(n / 2 ** 20).toFixed(0)} MiB`;
}

/** MemAvailable from /proc/meminfo (what Linux can hand out without swapping), else os.freemem(). */
export function availableMemoryBytes(): number {
  try {
    const m = /^MemAvailable:\s+(\d+) kB$/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'));
    if (m) return Number(m[1]) * 1024;
  } catch {
    // not Linux
  }
  return os.freemem();
}

/** True when every preset the engine reported holds the whole model in its budgets. */
export function fitsWholeEverywhere(model: PresetModel, facts: ReadonlyMap<string, PresetFacts>): boolean {
  return facts.size > 0 && [...facts.values()].every((f) => model.bytes <= f.trunkBytes + f.expertCacheBytes);
}

/** The picker's placeholder when the model fits whole in every preset, else undefined. */
export function wholeModelNote(model: PresetModel | undefined, facts: ReadonlyMap<string, PresetFacts>): string | undefined {
  if (!model || !fitsWholeEverywhere(model, facts)) return undefined;
  return `${model.name} (${formatBytes(model.bytes)}) fits whole in every preset; presets matter for larger models`;
}

/**
 * One item per preset, from k3/presets/list. `facts` holds the budgets the engine
 * reported, by name; `recommended` is the engine's pick, or `auto` when the engine
 * reported none.
 */
export function presetItems(
  presets: readonly { id: string; description?: string }[],
  current: string,
  availableBytes: number,
  facts: ReadonlyMap<string, PresetFacts> = new Map(),
  recommended = 'auto',
  model?: PresetModel,
): PresetItem[] {
  const whole = model !== undefined && fitsWholeEverywhere(model, facts);
  return presets.map(({ id: preset, description: serverText }) => {
    const f = facts.get(preset);
    const marks = [preset === recommended ? 'recommended' : '', preset === current ? 'current' : ''].filter(Boolean);
    const label = `${preset === current ? '$(check) ' : ''}${preset}`;
    let detail: string;
    let description = marks.join(', ');
    const check = f?.secondsPerToken !== undefined ? f.forecastCheck : undefined;
    // Time to first token for the longest prompt a completion sends (2,048 tokens).
    const first = f?.secondsPerToken !== undefined ? f.firstTokenSeconds?.find((t) => t.tokens === 2048) : undefined;
    const forecast =
      f?.secondsPerToken !== undefined
        ? `~${formatSeconds(f.secondsPerToken)}/token${first ? `, first token ~${formatSeconds(first.seconds)} (2,048-token prompt)` : ''} here${
            check ? ` (±${Math.round(100 * check.worst)} %)` : ''
          }`
        : '';
    const checked = check
      ? `; forecast checked on this machine: ${check.within} of ${check.configurations} slice configurations within 15 %, the worst off by ${Math.round(100 * check.worst)} %`
      : '';
    if (f && model) {
      const budget = f.trunkBytes + f.expertCacheBytes;
      const budgets = `trunk ${formatBytes(f.trunkBytes)} + expert cache ${formatBytes(f.expertCacheBytes)}`;
      if (whole) {
        detail = budgets;
      } else {
        const held = Math.min(model.bytes, budget);
        const fits = held <= availableBytes;
        description = [description, `holds ${formatBytes(held)} of ${model.name}`].filter(Boolean).join(' · ');
        detail = `${budgets}: ${
          held === model.bytes ? `all ${formatBytes(model.bytes)} of ${model.name} stay in memory` : `${formatBytes(held)} of its ${formatBytes(model.bytes)} stay in memory, the rest is read as needed`
        }; ${fits ? `fits in the ${formatBytes(availableBytes)} available` : `more than the ${formatBytes(availableBytes)} available`}`;
      }
      // The forecast is the full K3's, whatever is loaded: said so, and in the description,
      // which the picker shows whole (a long detail is cut off).
      if (forecast) description = [description, `full K3 ${forecast}`].filter(Boolean).join(' · ');
    } else if (f) {
      const fits = f.peakBytes <= availableBytes;
      description = [description, `peak ${formatBytes(f.peakBytes)}`, forecast].filter(Boolean).join(' · ');
      detail = `trunk ${formatBytes(f.trunkBytes)} + expert cache ${formatBytes(f.expertCacheBytes)}; full K3 peaks at ${formatBytes(
        f.peakBytes,
      )}: ${fits ? `fits in the ${formatBytes(availableBytes)} available` : `does not fit in the ${formatBytes(availableBytes)} available`}`;
    } else if (preset === 'auto') {
      detail = `sizes the trunk and the expert cache from the ${formatBytes(availableBytes)} available when the engine loads`;
    } else if (preset === 'mapped') {
      detail = 'no budgets: every weight is mapped from the shards and the operating system keeps what it can';
    } else {
      detail = 'budgets and peak memory: not reported by the server';
    }
    detail += checked;
    if (serverText) detail = `${serverText.replace(/\.$/, '')}. ${detail[0].toUpperCase()}${detail.slice(1)}`;
    return { preset, label, description, detail };
  });
}
