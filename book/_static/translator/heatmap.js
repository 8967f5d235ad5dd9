// An attention heatmap as an accessible data table, for both translator pages: one row per query
// token, one column per key token, each cell's colour its weight (custom.css draws the ramp for
// the page's light or dark theme from --w). Every cell also holds its weight as text for screen
// readers, and drawStrongest lists, in words, the token each row attends to most.

function cell(tag, text, className) {
  const element = document.createElement(tag);
  element.textContent = text;
  if (className) element.className = className;
  return element;
}

// table: the <table>; rows, columns: token labels; weights[r][c]; corner: the top-left header's text;
// rowLang, columnLang: the languages of the two sides ("de", "en").
export function drawHeatmap(table, { rows, columns, weights, corner, rowLang, columnLang }) {
  const header = document.createElement("tr");
  header.append(cell("th", corner, "corner"));
  for (const label of columns) {
    const th = cell("th", label, "source");
    th.scope = "col";
    th.lang = columnLang;
    header.append(th);
  }
  const body = rows.map((label, r) => {
    const row = document.createElement("tr");
    row.className = "output-row";
    const th = cell("th", label, "output");
    th.scope = "row";
    th.lang = rowLang;
    row.append(th);
    weights[r].forEach((value) => {
      const td = document.createElement("td");
      td.style.setProperty("--w", value.toFixed(3));
      td.dataset.w = String(value);
      td.textContent = value.toFixed(2); // for screen readers: custom.css makes it transparent
      row.append(td);
    });
    return row;
  });
  table.replaceChildren(header, ...body);
  // A cell's tooltip ("output → source: weight") is written when the pointer first reaches it, by
  // one handler for the whole table rather than one title per cell drawn.
  table.onmouseover = ({ target }) => {
    const td = target.closest("td");
    if (!td || td.title) return;
    const row = td.parentElement;
    td.title = `${row.cells[0].textContent} → ${table.rows[0].cells[td.cellIndex].textContent}: ` +
      Number(td.dataset.w).toFixed(2);
  };
}

// The same weights in words, into the <ol> `list`: for each row, the column it attends to most.
export function drawStrongest(list, { rows, columns, weights, rowLang, columnLang }) {
  list.replaceChildren(...rows.map((label, r) => {
    const best = weights[r].reduce((b, w, c) => (w > weights[r][b] ? c : b), 0);
    const item = document.createElement("li");
    item.append(cell("span", label, "translator-token"), " → ",
      cell("span", columns[best], "translator-token"), ` (${weights[r][best].toFixed(2)})`);
    item.children[0].lang = rowLang;
    item.children[1].lang = columnLang;
    return item;
  }));
}
