// SentencePiece's byte-pair encoding, in the browser: the same ids as the package's Tokenizer.
//
// Reads the tokenizer.json that book_tools.web.export writes (pieces, scores, and what the
// normalizer does beyond NFKC). Three steps, as SentencePiece does them:
//   1. normalize: SentencePiece replaces, at each position, the longest string its character map
//      holds; that map is NFKC but for a few hundred entries (export.nfkc_exceptions), so here the
//      longest of those exceptions is replaced and the text between them goes through the browser's
//      own NFKC (String.prototype.normalize). Then leading, trailing and repeated spaces are dropped
//      and spaces (and the start) marked with "▁";
//   2. merge: start from single characters and repeatedly merge the adjacent pair whose union is a
//      piece with the highest score (the leftmost pair on a tie): lesson 02's BPE, applied;
//   3. look up: a piece's id, or <unk> for a character the vocabulary lacks (a run of them is one <unk>).
// tests/site/test_translator_page.py checks it against SentencePiece on every sentence of test_2016_flickr
// and on odd input (accents composed and decomposed, full-width characters, ligatures, emoji).

const SPACE = "\u2581"; // ▁
const NORMAL = 1, UNKNOWN = 2, CONTROL = 3;

// A character that NFKC turns into several (a ligature: "ﬁ" is "fi") or into a combining mark (the
// half-width voiced sound mark), or a letter with its accent composed ("ä"): SentencePiece's map
// takes it alone, so marks after it do not compose with it, as they would under NFKC of the whole.
const COMBINING = /^\p{M}/u;
function alone(char) {
  const normal = char.normalize("NFKC");
  if (normal === char) return char.normalize("NFD") !== char; // a letter with its accent composed: "ä"
  return [...normal].length > 1 || (COMBINING.test(normal) && !COMBINING.test(char));
}

export class Tokenizer {
  constructor(spec) {
    this.spec = spec;
    this.pieces = spec.pieces.map((p) => p[0]);
    this.scores = spec.pieces.map((p) => p[1]);
    this.types = spec.pieces.map((p) => p[2]);
    this.ids = new Map(); // normal pieces only: what merges may produce
    this.pieces.forEach((piece, id) => { if (this.types[id] === NORMAL) this.ids.set(piece, id); });
    this.unkId = this.types.indexOf(UNKNOWN);
    this.exceptions = new Map(Object.entries(spec.normalization_exceptions)); // a few hundred entries
    this.longestKey = spec.normalization_longest_key; // in characters
  }

  // Step 1. Code points, not UTF-16 units: "𝔸" is one character to SentencePiece too.
  normalize(text) {
    const chars = [...text];
    let mapped = "", run = ""; // run: the text since the last exception, normalized by NFKC as a whole
    for (let i = 0; i < chars.length;) {
      let used = 0;
      for (let n = Math.min(this.longestKey, chars.length - i); n >= 1 && !used; n--) {
        const key = chars.slice(i, i + n).join("");
        if (this.exceptions.has(key)) {
          mapped += run.normalize("NFKC") + this.exceptions.get(key);
          run = "";
          used = n;
        }
      }
      if (!used && alone(chars[i])) { // as SentencePiece maps it: by itself, not composed with what follows
        mapped += run.normalize("NFKC") + chars[i].normalize("NFKC");
        run = "";
      } else if (!used) run += chars[i];
      i += used || 1;
    }
    mapped += run.normalize("NFKC");
    const out = [];
    let prevSpace = this.spec.remove_extra_whitespaces; // true: spaces at the start are dropped
    if (this.spec.add_dummy_prefix) out.push(null); // a placeholder: "▁" only if the text is not empty
    for (const c of mapped) {
      if (c === " " && prevSpace && this.spec.remove_extra_whitespaces) continue;
      out.push(c === " " && this.spec.escape_whitespaces ? SPACE : c);
      prevSpace = c === " ";
    }
    if (this.spec.remove_extra_whitespaces) {
      while (out.length && out[out.length - 1] === SPACE) out.pop();
    }
    if (out.length && out[0] === null) out[0] = SPACE;
    if (out.length === 1 && out[0] === SPACE && this.spec.add_dummy_prefix) return "";
    return out.filter((c) => c !== null).join("");
  }

  // Steps 2 and 3: ids of the pieces of `text` (no <bos> or <eos>).
  encode(text) {
    const symbols = [...this.normalize(text)];
    for (;;) {
      let best = -1, bestScore = -Infinity;
      for (let j = 0; j + 1 < symbols.length; j++) {
        const id = this.ids.get(symbols[j] + symbols[j + 1]);
        if (id !== undefined && this.scores[id] > bestScore) { best = j; bestScore = this.scores[id]; }
      }
      if (best < 0) break;
      symbols.splice(best, 2, symbols[best] + symbols[best + 1]);
    }
    const ids = [];
    for (const s of symbols) {
      const id = this.ids.has(s) ? this.ids.get(s) : this.unkId;
      if (!(id === this.unkId && ids[ids.length - 1] === this.unkId)) ids.push(id);
    }
    return ids;
  }

  // The text of `ids`: control tokens dropped, <unk> shown as " ⁇ ", "▁" as a space, none at the start.
  decode(ids) {
    let text = "", atStart = true;
    for (const id of ids) {
      if (this.types[id] === CONTROL) continue;
      let surface;
      if (this.types[id] === UNKNOWN) surface = this.spec.unk_surface;
      else {
        surface = this.pieces[id];
        if (atStart && this.spec.add_dummy_prefix && surface.startsWith(SPACE)) surface = surface.slice(1);
        surface = surface.replaceAll(SPACE, " ");
      }
      text += surface;
      atStart = atStart && surface === ""; // a lone "▁" at the start leaves the next piece's space to strip
    }
    return text;
  }

  // A piece as a reader should see it in a heatmap's labels.
  label(id) {
    if (this.types[id] === UNKNOWN) return "<unk>";
    return this.pieces[id].replaceAll(SPACE, "_");
  }
}
