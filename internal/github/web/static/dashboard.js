// perfgate dashboard: draws the charts of the series and check-run pages
// with uPlot (vendored, static/uplot). Data comes from JSON elements the
// server rendered into the page; nothing is fetched from elsewhere.
(function () {
  "use strict";
  var BLUE = "#1f6feb", RED = "#d1242f", GREEN = "#2da44e", PURPLE = "#8250df", GOLD = "#bf8700";

  // The chart fits its box: on a 390 px phone that is the screen less
  // the page's padding, never wider (the page must not scroll sideways).
  function width(el) { return Math.max(200, el.clientWidth || 900); }
  function narrow(el) { return width(el) < 560; }

  // Axis and grid colours follow the page's theme (style.css variables).
  function themed() {
    var css = getComputedStyle(document.documentElement);
    var fg = css.getPropertyValue("--muted").trim() || "#57606a", grid = css.getPropertyValue("--grid").trim() || "rgba(0,0,0,0.08)";
    return { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  }
  function axis(extra) {
    var a = themed();
    for (var k in extra) a[k] = extra[k];
    return a;
  }

  // Vertical marks (change points, releases) drawn over the plot. Each
  // label sits beside its line on the side with room, in the first row
  // where it overlaps no other label, so close marks never overprint.
  function marksPlugin(changes, releases) {
    var rows;
    function line(u, x, color, dash, label) {
      var ctx = u.ctx, dpr = devicePixelRatio, px = Math.round(u.valToPos(x, "x", true));
      if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) return;
      ctx.save();
      ctx.strokeStyle = color; ctx.lineWidth = 2 * dpr;
      ctx.setLineDash(dash);
      ctx.beginPath(); ctx.moveTo(px, u.bbox.top); ctx.lineTo(px, u.bbox.top + u.bbox.height); ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = color; ctx.font = (11 * dpr) + "px system-ui, sans-serif";
      var w = ctx.measureText(label).width, right = px > u.bbox.left + u.bbox.width / 2;
      var from = right ? px - 4 * dpr - w : px + 4 * dpr, to = from + w;
      var row = 0;
      while (rows[row] && rows[row].some(function (r) { return from < r[1] + 6 * dpr && to > r[0] - 6 * dpr; })) row++;
      (rows[row] = rows[row] || []).push([from, to]);
      ctx.textAlign = "left"; ctx.textBaseline = "alphabetic";
      ctx.fillText(label, from, u.bbox.top + (12 + 13 * row) * dpr);
      ctx.restore();
    }
    return { hooks: { draw: [function (u) {
      rows = [];
      (changes || []).forEach(function (m) { line(u, m.x, m.regression ? RED : PURPLE, [6 * devicePixelRatio, 4 * devicePixelRatio], m.label); });
      (releases || []).forEach(function (m) { line(u, m.x, GOLD, [], m.label); });
    }] } };
  }

  function seriesChart(el) {
    var d = JSON.parse(document.getElementById("chart-data").textContent);
    var weekly = el.dataset.kind === "weekly";
    var series = [{}, {
      label: d.metric + (weekly ? " (weekly median)" : ""), stroke: BLUE, width: 1,
      points: { show: true, size: 7, fill: BLUE, stroke: BLUE },
      value: function (u, v) { return v == null ? "–" : v.toPrecision(4) + " " + d.unit; }
    }, {
      label: "baseline", stroke: GREEN, width: 2, dash: [8, 4], points: { show: false },
      paths: uPlot.paths.stepped({ align: 1 })
    }, {
      label: "regression", stroke: RED, width: 0, points: { show: true, size: 11, fill: RED, stroke: RED },
      paths: function () { return null; }
    }];
    var data = [d.x, d.y, d.baseline, d.regression];
    var bands;
    if (weekly) {
      // The week's min–max, drawn as the band the legend names.
      series.push({ label: "min", stroke: "rgba(31,111,235,0.35)", width: 1, points: { show: false } });
      series.push({ label: "max", stroke: "rgba(31,111,235,0.35)", width: 1, points: { show: false } });
      data.push(d.low, d.high);
      bands = [{ series: [5, 4], fill: "rgba(31,111,235,0.22)" }];
    }
    var small = narrow(el);
    var u = new uPlot({
      width: width(el), height: small ? 300 : 380,
      cursor: { points: { size: 10 } },
      scales: { x: { time: true } },
      axes: [axis({ space: small ? 70 : 50 }), axis({ label: small ? "" : d.unit, size: small ? 52 : 70 })],
      series: series,
      bands: bands,
      // The page's own legend names the series; uPlot's would not fit a phone.
      legend: { show: !small },
      plugins: [marksPlugin(d.changes, d.releases)]
    }, data, el);
    window.addEventListener("resize", function () {
      if (Math.abs(width(el) - u.width) > 8) u.setSize({ width: width(el), height: u.height });
    });
    // A click opens the run under the cursor.
    u.over.addEventListener("click", function () {
      var i = u.cursor.idx;
      if (i != null && d.links[i]) window.location.href = d.links[i];
    });
    u.over.style.cursor = "pointer";
    el.dataset.points = String(d.y.filter(function (v) { return v != null; }).length);
    el.dataset.changes = String((d.changes || []).length);
    window.perfgateChart = u;
    window.perfgateData = d;
  }

  function cdfChart(script) {
    var c = JSON.parse(script.textContent);
    var el = document.getElementById(script.dataset.target);
    var u = new uPlot({
      width: Math.min(380, el.clientWidth || 380), height: 260,
      scales: { x: { time: false }, y: { range: [0, 1] } },
      axes: [axis({ label: c.series + " (ms)" }), axis({ size: 40 })],
      series: [{}, { label: "base", stroke: BLUE, width: 2 }, { label: "this commit", stroke: RED, width: 2 }],
      legend: { show: false }
    }, [c.x, c.base, c.head], el);
    el.dataset.drawn = "1";
    (window.perfgateCDFs = window.perfgateCDFs || []).push(u);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var el = document.getElementById("chart");
    if (el) seriesChart(el);
    // The series page's pickers apply at once (the button stays for
    // browsers without script).
    var sw = document.getElementById("switch");
    if (sw) sw.querySelectorAll("select").forEach(function (s) {
      s.addEventListener("change", function () { sw.submit(); });
    });
    document.querySelectorAll("script.cdf-data").forEach(cdfChart);
    document.body.dataset.ready = "1";
  });
})();
