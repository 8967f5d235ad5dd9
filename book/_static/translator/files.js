// The translator's files: fetched from this site, and kept in the browser's Cache Storage (used by
// translator.js on the page and by worker.js).

export async function fetchOk(url, signal) {
  const response = await fetch(url, { signal });
  if (!response.ok) throw new Error(`${url}: ${response.status} ${response.statusText}`);
  return response;
}

// The translator's files kept in the browser's Cache Storage, so that a second visit downloads no
// model and the translator works offline once it has loaded. A file's key is its address with its
// version (`?v=`: the first 16 hex digits of its SHA-256, from model.json, or the runtime's
// version): a new model is fetched, and the older copy deleted. Without Cache Storage (a private
// window may refuse it) the files come from the network each time.
const CACHE = "transformer-book-translator";

export async function openCache() {
  try {
    return await caches.open(CACHE);
  } catch {
    return null;
  }
}

// A file as a Blob. A Blob's bytes stay in the browser's own storage until someone reads them, so
// the page can hand a model file to the worker without holding a copy of it. Reading a response
// with blob() also keeps less memory than arrayBuffer(): Chromium keeps no extra copy of the download.
export async function cachedBlob(url, version, signal) {
  const key = `${url}?v=${version}`;
  const cache = await openCache();
  const hit = cache && (await cache.match(key).catch(() => null));
  if (hit) return hit.blob();
  const blob = await (await fetchOk(url, signal)).blob();
  if (cache) keep(cache, url, key, new Response(blob)).catch(() => {}); // not awaited
  return blob;
}

export async function cachedBytes(url, version, signal) {
  return new Uint8Array(await (await cachedBlob(url, version, signal)).arrayBuffer());
}

// A file's new copy in Cache Storage, the older versions deleted; the load does not wait for it.
// Storage full or refused: the next visit downloads the file again.
async function keep(cache, url, key, response) {
  for (const old of await cache.keys()) if (old.url.split("?")[0] === url) await cache.delete(old);
  await cache.put(key, response);
}
