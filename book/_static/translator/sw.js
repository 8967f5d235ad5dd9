// The translator page's service worker: it keeps the page's own files (its HTML, styles, scripts,
// fonts and the translator's worker), so that the page opens and translates offline once it has
// been loaded. The models, the tokenizer and ONNX Runtime's WebAssembly are kept by files.js in
// their own cache; this worker leaves their requests alone.
//
// translator_site.py writes this file next to the page, as translator-sw.js, with BUILD set to a
// hash of the built site's files. A new build changes the hash, so the browser installs the new
// worker, which starts an empty cache and deletes the old one.
//
// Network first: while the reader is online every file comes from the site as it would without
// this worker (and is kept); only a request that fails is answered from the cache.

const BUILD = "unbuilt";
const PREFIX = "transformer-book-translator-page-";
const CACHE = PREFIX + BUILD;
const OWN = /\/_static\/translator\/(models\/|ort\/.*\.wasm$)/; // files.js keeps these

self.addEventListener("install", () => self.skipWaiting());

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const name of await caches.keys()) if (name.startsWith(PREFIX) && name !== CACHE) await caches.delete(name);
    await self.clients.claim();
  })());
});

function kept(url) {
  return url.origin === self.location.origin && !OWN.test(url.pathname);
}

// The page gets the response as it arrives; its copy is written to the cache meanwhile.
async function networkFirst(event) {
  const request = event.request;
  try {
    const response = await fetch(request);
    if (response.ok) {
      const copy = response.clone();
      event.waitUntil(caches.open(CACHE).then((cache) => cache.put(request, copy)).catch(() => {}));
    }
    return response;
  } catch (error) {
    const copy = await caches.match(request, { cacheName: CACHE, ignoreVary: true });
    if (copy) return copy;
    throw error;
  }
}

self.addEventListener("fetch", (event) => {
  if (event.request.method === "GET" && kept(new URL(event.request.url))) event.respondWith(networkFirst(event));
});

// The page, once its model is loaded, sends the addresses of every file it used: those it fetched
// before this worker was running are kept too (from the browser's HTTP cache, as a rule). The reply
// says how many are kept.
self.addEventListener("message", (event) => {
  const urls = (event.data?.keep ?? []).filter((url) => kept(new URL(url)));
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    const missing = [];
    for (const url of new Set(urls)) if (!(await cache.match(url, { ignoreVary: true }))) missing.push(url);
    await Promise.all(missing.map((url) => cache.add(url).catch(() => {})));
    event.ports[0]?.postMessage({ kept: (await cache.keys()).length });
  })());
});
