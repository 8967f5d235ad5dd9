// The translator's worker (worker.js), started as the page begins to load. translator_site.py writes
// this script into the head of each page that translates, where the parser runs it before the
// theme's scripts and the page's own modules have arrived: the worker then fetches ONNX Runtime's
// WebAssembly, the largest file of the first translation, while the rest of the page loads (the
// page's own script runs a second or more later on a slow phone). translator.js takes the worker
// over, and reads what the browser lacks, through `self.translatorStart`.
"use strict";

self.translatorStart = (() => {
  // What the translator needs of a browser: WebAssembly with SIMD (ONNX Runtime Web's build) and
  // module workers (worker.js runs it). SIMD is detected as wasm-feature-detect does it: does the
  // browser accept a tiny module that uses one SIMD instruction (i8x16.popcnt)? Module workers as
  // usual too: a browser that has them reads the `type` option of a worker it is asked to start.
  const SIMD_MODULE = new Uint8Array([
    0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 10, 1, 8, 0, 65, 0, 253, 15, 253, 98, 11,
  ]);
  const simd = () => {
    try {
      return typeof WebAssembly === "object" && WebAssembly.validate(SIMD_MODULE);
    } catch {
      return false;
    }
  };
  const moduleWorkers = () => {
    if (typeof Worker !== "function") return false;
    let read = false;
    try { // the option's getter stops the worker before it starts: nothing is fetched
      new Worker("data:,", { get type() { read = true; throw new Error("asked"); } }).terminate();
    } catch {
      // asked, or no worker at all
    }
    return read;
  };
  const unsupported = simd() && moduleWorkers() ? null : "This browser cannot run the translator: it needs " +
    "WebAssembly with SIMD and module workers, which Chrome and Edge have had since 2021, Firefox since " +
    "version 114 and Safari since version 16.4.";

  let worker = null;
  let failed = false;
  if (!unsupported) { // the site's root, as Sphinx writes it on the page, then the worker's place in it
    const root = new URL(document.documentElement.dataset.content_root ?? "", location.href);
    worker = new Worker(new URL("_static/translator/worker.js", root), { type: "module" });
    worker.addEventListener("error", (event) => {
      event.preventDefault(); // the page's script starts another
      failed = true;
    });
  }
  return {
    unsupported, // null, or the sentence a page shows instead of the translator, downloading nothing
    takeWorker() { // the worker, once, unless it failed to start: translator.js then starts another
      const taken = failed ? null : worker;
      worker = null;
      return taken;
    },
  };
})();
