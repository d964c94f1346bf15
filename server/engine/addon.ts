// addon.ts - finds and loads the native engine addon (k3.node). The server bundle lives in
// dist/ beside dist/k3.node, so that is the default; K3_ADDON overrides it (tests, tools).
// This is the only file that calls require() on the addon: everything else imports the
// typed facades in this folder.
import * as path from 'node:path';

/** What the addon exports, as the C++ side in native/addon/addon.cc registers it. */
export interface NativeAddon {
  version(): string;
}

let loaded: NativeAddon | undefined;

export function addonPath(): string {
  return process.env.K3_ADDON ?? path.join(__dirname, 'k3.node');
}

export function loadAddon(): NativeAddon {
  if (!loaded) {
    const file = addonPath();
    try {
      // A real require at run time; esbuild must not try to bundle the binary.
      loaded = (module.require as (id: string) => unknown)(file) as NativeAddon;
    } catch (e) {
      throw new Error(`cannot load the K3 engine addon from ${file}: ${(e as Error).message}`);
    }
  }
  return loaded;
}
