// Pictures drawn by the page's own code as inline SVG: built node by node with createElementNS (labels
// go in as text, never parsed as markup), coloured by classes in dashboard.css (the page's CSP allows
// no inline style), each with a text alternative that a screen reader reads instead of the picture.
import { duration, el, number } from "./dom.js";

// The SVG namespace's name: an identifier the DOM needs to make SVG elements, never fetched.
const SVG_NS = "http://www.w3.org/2000/svg";
const CHAR_WIDTH = 7; // about one character of the charts' 12px text, in viewBox units
const ROW = 22; // a bar's row
const BAR = 14; // a bar's thickness

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// An <svg role="img">: its <title> (a tooltip too) and aria-label say the same, what the picture shows.
function picture(className, width, height, label, ...children) {
  return svg("svg", { class: className, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label },
    svg("title", {}, label), ...children);
}

const round = (value) => Math.round(value * 10) / 10;

// A line of values over time. points: [time in ms, value] pairs, oldest first; the value axis starts
// at 0, so a dip is drawn as deep as it was. Null for fewer than 2 points: no line to draw yet.
export function sparkline(points, { what, format = number, width = 480, height = 64, className = "sparkline" } = {}) {
  if (!points || points.length < 2) return null;
  const values = points.map(([, value]) => value);
  const [first, last] = [points[0][0], points.at(-1)[0]];
  const highest = Math.max(...values);
  const label = `${what} over the last ${duration((last - first) / 1000)}: lowest ${format(Math.min(...values))}, ` +
    `highest ${format(highest)}, now ${format(values.at(-1))}`;
  const pad = 3;
  const x = (time) => round(pad + ((time - first) / (last - first || 1)) * (width - 2 * pad));
  const y = (value) => round(height - pad - (value / (highest || 1)) * (height - 2 * pad));
  const line = points.map(([time, value]) => `${x(time)},${y(value)}`).join(" ");
  return picture(className, width, height, label,
    svg("polygon", { class: "spark-area", points: `${x(first)},${height - pad} ${line} ${x(last)},${height - pad}` }),
    svg("polyline", { class: "spark-line", points: line }),
    svg("circle", { class: "spark-now", cx: x(last), cy: y(values.at(-1)), r: 3 }));
}

// One horizontal bar per label, the longest for the largest value, each value written after its bar
// and in the bar's <title>. The picture's label sums it up; a table only screen readers see (and the
// page's text when copied) holds every number. Returns a <figure>, or null for no labels.
export function bars(labels, values, { title, unit = "", format = number, width = 420, className = "bars" } = {}) {
  if (!labels.length) return null;
  const written = values.map(format);
  const labelWidth = Math.max(...labels.map((label) => label.length)) * CHAR_WIDTH + 10;
  const room = width - labelWidth - Math.max(...written.map((text) => text.length)) * CHAR_WIDTH - 10;
  const most = Math.max(...values, 0) || 1;
  const largest = values.indexOf(Math.max(...values));
  const label = `${title}: ${labels.length} bars, from ${labels[0]} to ${labels.at(-1)}; ` +
    `the largest ${labels[largest]}, ${written[largest]}${unit}`;
  const rows = labels.map((name, index) => {
    const top = index * ROW;
    const length = values[index] ? Math.max(1, round((room * values[index]) / most)) : 0;
    return svg("g", { class: "bar" },
      svg("title", {}, `${name}: ${written[index]}${unit}`),
      svg("text", { class: "bar-label", x: labelWidth - 6, y: top + ROW / 2 }, name),
      svg("rect", { class: "bar-rect", x: labelWidth, y: top + (ROW - BAR) / 2, width: length, height: BAR }),
      svg("text", { class: "bar-value", x: labelWidth + length + 4, y: top + ROW / 2 }, written[index]));
  });
  return el("figure", { class: "chart" },
    picture(className, width, labels.length * ROW, label, rows),
    el("div", { class: "visually-hidden" }, el("table", {},
      el("caption", {}, title),
      el("tbody", {}, labels.map((name, index) => el("tr", {}, el("th", { scope: "row" }, name), el("td", {}, `${written[index]}${unit}`)))))));
}
