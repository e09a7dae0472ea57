// perfgate dashboard: draws the charts of the series and check-run pages
// with uPlot (vendored, static/uplot). Data comes from JSON elements the
// server rendered into the page; nothing is fetched from elsewhere.
(function () {
  "use strict";
  var BLUE = "#1f6feb", RED = "#d1242f", GREEN = "#2da44e", PURPLE = "#8250df", GOLD = "#bf8700";

  function width(el) { return Math.max(320, el.clientWidth || 900); }

  // Vertical marks (change points, releases) drawn over the plot.
  function marksPlugin(changes, releases) {
    function line(u, x, color, dash, label) {
      var ctx = u.ctx, px = Math.round(u.valToPos(x, "x", true));
      if (px < u.bbox.left || px > u.bbox.left + u.bbox.width) return;
      ctx.save();
      ctx.strokeStyle = color; ctx.lineWidth = 2 * devicePixelRatio;
      ctx.setLineDash(dash);
      ctx.beginPath(); ctx.moveTo(px, u.bbox.top); ctx.lineTo(px, u.bbox.top + u.bbox.height); ctx.stroke();
      ctx.setLineDash([]);
      ctx.fillStyle = color; ctx.font = (11 * devicePixelRatio) + "px system-ui, sans-serif";
      // The label sits beside the line, on the side with room.
      var right = px > u.bbox.left + u.bbox.width / 2;
      ctx.textAlign = right ? "right" : "left"; ctx.textBaseline = "alphabetic";
      ctx.fillText(label, px + (right ? -4 : 4) * devicePixelRatio, u.bbox.top + 12 * devicePixelRatio);
      ctx.restore();
    }
    return { hooks: { draw: [function (u) {
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
    if (weekly) {
      series.push({ label: "min", stroke: "#8c959f", dash: [2, 3], width: 1, points: { show: false } });
      series.push({ label: "max", stroke: "#8c959f", dash: [2, 3], width: 1, points: { show: false } });
      data.push(d.low, d.high);
    }
    var u = new uPlot({
      width: width(el), height: 380,
      cursor: { points: { size: 10 } },
      scales: { x: { time: true } },
      axes: [{}, { label: d.unit, size: 70 }],
      series: series,
      plugins: [marksPlugin(d.changes, d.releases)]
    }, data, el);
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
      width: 380, height: 260,
      scales: { x: { time: false }, y: { range: [0, 1] } },
      axes: [{ label: c.series + " (ms)" }, { size: 40 }],
      series: [{}, { label: "base", stroke: BLUE, width: 2 }, { label: "this commit", stroke: RED, width: 2 }],
      legend: { show: false }
    }, [c.x, c.base, c.head], el);
    el.dataset.drawn = "1";
    (window.perfgateCDFs = window.perfgateCDFs || []).push(u);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var el = document.getElementById("chart");
    if (el) seriesChart(el);
    document.querySelectorAll("script.cdf-data").forEach(cdfChart);
    document.body.dataset.ready = "1";
  });
})();
