// Sentences to start from, on both translator pages: three of test_2016_flickr (none is in the
// training data) and two everyday ones from outside the domain, marked as such. model.json carries
// them (benchmarks/confidence.py chose and measured them). A click hands the sentence to `pick`.
// A failed fetch rejects; the pages show the examples again once the model has loaded.

import { modelInfo } from "./translator.js";

export async function showExamples(list, direction, pick) {
  const { examples } = await modelInfo(direction); // shared with the model's load: one fetch
  const button = (text, note = "") => {
    const element = document.createElement("button");
    element.type = "button";
    element.className = "translator-example";
    const sentence = document.createElement("span");
    sentence.lang = direction.split("_")[0]; // the sentence is in the source language, the note in English
    sentence.textContent = text;
    element.append(sentence, note);
    element.addEventListener("click", () => pick(text));
    return element;
  };
  const label = document.createElement("span");
  label.textContent = "Start from: ";
  list.replaceChildren(
    label,
    ...examples.test.map((text) => button(text)),
    ...examples.outside.map((text) => button(text, " (outside the domain)")),
  );
  return examples;
}
