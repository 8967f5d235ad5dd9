// Greedy decoding, exactly as the package's decoding.extend does it, and the numbers the pages read
// from a step's logits. The worker runs the loop (worker.js: no round trip to the page at each step);
// the look-inside page takes the steps one at a time with the same functions (through translator.js).

// The translator's confidence: the mean probability the model gave the tokens it chose (0 for none).
export function confidenceOf(probabilities) {
  return probabilities.length ? probabilities.reduce((a, b) => a + b, 0) / probabilities.length : 0;
}

// softmax(logits)[index], in double precision (never-generated tokens are -Infinity: weight 0).
export function probability(logits, index) {
  const top = logits[argmax(logits)];
  let sum = 0;
  for (let v = 0; v < logits.length; v++) sum += Math.exp(logits[v] - top);
  return Math.exp(logits[index] - top) / sum;
}

// The index of the largest value (the first of equals, as torch.argmax on a CPU).
export function argmax(values) {
  let best = 0;
  for (let v = 1; v < values.length; v++) if (values[v] > values[best]) best = v;
  return best;
}

// The most probable token at each step, until <eos> or the length limit (the last allowed token
// forced to <eos>). `next(prefix)` is one decoder call on the whole prefix (<bos> first): the next
// token's logits, the never-generated tokens at -Infinity, and the cross-attention of every prefix
// position. Returns the generated ids (<eos> last), the last step's cross-attention (one row per
// output token), whether the model chose <eos> itself (false: a runaway output, cut at the limit)
// and the probability of each token it chose.
export async function greedy(next, { bos, eos, limit }) {
  const out = [bos];
  const chosen = [];
  let attention = null;
  let finished = false;
  for (let step = 0; step < limit; step++) {
    const { logits, cross } = await next(out);
    const id = argmax(logits);
    attention = cross;
    if (step + 1 >= limit && id !== eos) { // the limit: <eos> forced, not chosen
      out.push(eos);
      break;
    }
    out.push(id);
    chosen.push(probability(logits, id));
    if (id === eos) {
      finished = true;
      break;
    }
  }
  return { ids: out.slice(1), attention, finished, chosen };
}
