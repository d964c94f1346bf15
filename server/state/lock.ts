// lock.ts - the lock that lets several language servers (one per window of a workspace)
// share one per-workspace folder. A writer holds it only for a few file operations (write
// a history file, read-modify-write workspace.json, sweep leftovers), never while the
// engine works, so a second window waits milliseconds, not turns. The lock is a file created
// with O_EXCL holding `pid host token`; one whose process is gone (same host) or that is
// older than STALE_MS (a holder never keeps it that long) is broken. It is synchronous on
// purpose: the store's callers are synchronous, and the wait is bounded by WAIT_MS, after
// which the write is refused with a LockBusy that names the holder.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { processAlive } from './files';

/** Longest wait for another holder before a write is refused. */
export const LOCK_WAIT_MS = 3000;
/** A lock older than this was left by a holder that died or hung: broken. */
export const LOCK_STALE_MS = 10_000;
const RETRY_MS = 5;

export class LockBusy extends Error {
  constructor(
    readonly file: string,
    readonly holder: string,
  ) {
    super(`another window of this workspace (${holder}) held ${file} for longer than ${LOCK_WAIT_MS} ms`);
    this.name = 'LockBusy';
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

export class StoreLock {
  private readonly token = crypto.randomBytes(8).toString('hex');
  private depth = 0;

  constructor(readonly file: string) {}

  /** Runs fn with the lock held (re-entrant). Throws LockBusy when another holder keeps it
   * past LOCK_WAIT_MS, and whatever fn or the file system throws. */
  hold<T>(fn: () => T): T {
    if (this.depth > 0) {
      this.depth++;
      try {
        return fn();
      } finally {
        this.depth--;
      }
    }
    this.acquire();
    this.depth = 1;
    try {
      return fn();
    } finally {
      this.depth = 0;
      this.release();
    }
  }

  private acquire(): void {
    const content = `${process.pid} ${os.hostname()} ${this.token}\n`;
    const deadline = Date.now() + LOCK_WAIT_MS;
    for (;;) {
      try {
        const fd = fs.openSync(this.file, 'wx');
        try {
          fs.writeSync(fd, content);
        } finally {
          fs.closeSync(fd);
        }
        return;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const held = this.readHolder();
      if (held && this.isStale(held)) {
        this.breakStale(held.content);
        continue;
      }
      if (Date.now() >= deadline) throw new LockBusy(this.file, held ? `process ${held.pid} on ${held.host}` : 'unknown');
      sleepSync(RETRY_MS);
    }
  }

  private readHolder(): { content: string; pid: number; host: string; ageMs: number } | undefined {
    try {
      const content = fs.readFileSync(this.file, 'utf8');
      const [pid, host] = content.trim().split(' ');
      return { content, pid: Number(pid), host: host ?? '', ageMs: Date.now() - fs.statSync(this.file).mtimeMs };
    } catch {
      return undefined; // released between the open and the read: try again
    }
  }

  private isStale(h: { pid: number; host: string; ageMs: number }): boolean {
    if (h.ageMs > LOCK_STALE_MS) return true;
    return h.host === os.hostname() && !processAlive(h.pid);
  }

  /** Removes a stale lock, unless another process replaced it since it was read. */
  private breakStale(seen: string): void {
    const aside = `${this.file}.broken-${this.token}`;
    try {
      fs.renameSync(this.file, aside);
    } catch {
      return; // someone else broke or released it
    }
    try {
      if (fs.readFileSync(aside, 'utf8') !== seen) fs.linkSync(aside, this.file); // a fresh lock: put it back
    } catch {
      // A newer lock exists already; ours was the stale one after all.
    } finally {
      fs.rmSync(aside, { force: true });
    }
  }

  private release(): void {
    try {
      if (fs.readFileSync(this.file, 'utf8').includes(this.token)) fs.rmSync(this.file, { force: true });
    } catch {
      // Already gone (broken as stale by another window after a very long hold).
    }
  }
}
