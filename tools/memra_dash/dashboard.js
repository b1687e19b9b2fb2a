// memra-dash: draws the plot specifications of #memra-data with Chart.js (inlined above), then
// records what it drew: window.__memraDash = {plots, rendered, errors, empty} and the element
// #memra-dash-status (data-state="done", data-plots, data-rendered, data-errors). A plot counts
// as rendered when its chart exists, at least one data point has finite canvas coordinates, and
// its canvas has painted pixels.
(function () {
  'use strict';
  var errors = window.__memraErrors || [];
  var origError = console.error;
  console.error = function () {
    errors.push('console.error: ' + Array.prototype.map.call(arguments, String).join(' '));
    return origError.apply(console, arguments);
  };
  var PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2',
                 '#7f7f7f', '#bcbd22'];
  var REF_COLOR = '#555555';

  function alpha(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return 'rgba(' + (n >> 16) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + a + ')';
  }

  function fmt(v, unit) {
    if (v === null || v === undefined || !isFinite(v)) return '-';
    var a = Math.abs(v);
    var s = a >= 1e4 ? Math.round(v).toLocaleString('en-US') : (a >= 1 ? v.toPrecision(4) : v.toPrecision(3));
    return unit ? s + ' ' + unit : s;
  }

  function datasetsFor(spec) {
    var ds = [];
    var xy = spec.type === 'xy';
    spec.series.forEach(function (s, i) {
      var c = PALETTE[i % PALETTE.length];
      ds.push({
        label: s.label, data: s.data, _tips: s.tips || [], type: spec.type === 'bar' ? 'bar' : 'line',
        borderColor: c, backgroundColor: spec.type === 'bar' ? alpha(c, 0.7) : c,
        pointRadius: 3, borderWidth: 2, spanGaps: true, tension: 0, order: 1
      });
    });
    // a band per series where the spec has several (bands[i].series: the line it spreads), else one
    (spec.bands || (spec.band ? [spec.band] : [])).forEach(function (b) {
      var c0 = PALETTE[(b.series || 0) % PALETTE.length];
      // max first, then min filled up to it ('-1': the previous dataset)
      ds.push({label: b.label + ' (max)', data: b.hi, _band: true, type: 'line',
               borderColor: alpha(c0, 0.25), backgroundColor: alpha(c0, 0.15), borderWidth: 1, pointRadius: 0,
               fill: false, spanGaps: true, order: 2});
      ds.push({label: b.label, data: b.lo, _band: true, _bandLegend: true, type: 'line',
               borderColor: alpha(c0, 0.25), backgroundColor: alpha(c0, 0.15), borderWidth: 1, pointRadius: 0,
               fill: '-1', spanGaps: true, order: 2});
    });
    (spec.refs || []).forEach(function (r, i) {
      var n = xy ? 0 : spec.labels.length;
      var data = [];
      for (var k = 0; k < n; k++) data.push(r.value);
      ds.push({label: r.label, data: data, _ref: true, type: 'line', borderColor: REF_COLOR,
               backgroundColor: REF_COLOR, borderDash: [6, 4 + 2 * i], borderWidth: 1.5, pointRadius: 0,
               fill: false, order: 0});
    });
    // xy reference curves (a dashed line through given points, e.g. the ideal batch scaling)
    (spec.refLines || []).forEach(function (r, i) {
      ds.push({label: r.label, data: r.data, _ref: true, type: 'line', borderColor: REF_COLOR,
               backgroundColor: REF_COLOR, borderDash: [6, 4 + 2 * i], borderWidth: 1.5, pointRadius: 0,
               fill: false, order: 0});
    });
    (spec.pointRefs || []).forEach(function (r, i) {
      ds.push({label: r.label, data: [{x: r.x, y: r.value}], _ref: true, type: 'line', showLine: false,
               borderColor: REF_COLOR, backgroundColor: REF_COLOR, pointStyle: 'crossRot', pointRadius: 8,
               borderWidth: 2, order: 0});
    });
    return ds;
  }

  function configFor(spec) {
    var xy = spec.type === 'xy';
    var unit = spec.unit || '';
    var yScale = {title: {display: true, text: spec.yTitle || ''}, beginAtZero: spec.type === 'bar' || !!spec.yZero};
    var xScale = xy ? {type: spec.xLog ? 'logarithmic' : 'linear', title: {display: true, text: spec.xTitle || ''}}
                    : {type: 'category', ticks: {autoSkip: true, maxRotation: 60, minRotation: 0}};
    if (xy && spec.xTicks) {
      // ticks at the measured values only (B = 1, 4, 16, 32; prompt lengths)
      xScale.afterBuildTicks = function (axis) {
        axis.ticks = spec.xTicks.map(function (v) { return {value: v}; });
      };
      xScale.ticks = {callback: function (v) { return String(v); }};
      xScale.min = spec.xTicks[0] / 1.25;
      xScale.max = spec.xTicks[spec.xTicks.length - 1] * 1.25;
    }
    return {
      type: spec.type === 'bar' ? 'bar' : 'line',
      data: {labels: xy ? undefined : spec.labels, datasets: datasetsFor(spec)},
      options: {
        animation: false, responsive: true, maintainAspectRatio: false, normalized: true,
        interaction: xy ? {mode: 'nearest', intersect: false} : {mode: 'index', intersect: false},
        scales: {x: xScale, y: yScale},
        plugins: {
          legend: {labels: {boxWidth: 14, filter: function (item, data) {
            var d = data.datasets[item.datasetIndex];
            return !d._band || d._bandLegend;
          }}},
          subtitle: {display: !!spec.subtitle, text: spec.subtitle || ''},
          tooltip: {
            filter: function (item) { return !item.dataset._band || item.dataset._bandLegend; },
            callbacks: {
              label: function (ctx) {
                var d = ctx.dataset;
                if (d._bandLegend) {
                  var hi = ctx.chart.data.datasets[ctx.datasetIndex - 1].data[ctx.dataIndex];
                  return d.label + ': ' + fmt(ctx.parsed.y, unit) + ' – ' + fmt(hi, unit);
                }
                return d.label + ': ' + fmt(ctx.parsed.y, unit);
              },
              afterLabel: function (ctx) {
                var t = ctx.dataset._tips && ctx.dataset._tips[ctx.dataIndex];
                return t ? t.split('\n') : '';
              }
            }
          }
        }
      }
    };
  }

  function painted(canvas) {
    try {
      var ctx = canvas.getContext('2d');
      var img = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
      var n = 0;
      for (var i = 3; i < img.length; i += 16) if (img[i] !== 0) n++;
      return n;
    } catch (e) {
      errors.push('reading canvas: ' + e);
      return 0;
    }
  }

  function drawnPoints(chart) {
    var n = 0;
    chart.data.datasets.forEach(function (d, i) {
      if (d._band || d._ref) return;
      var meta = chart.getDatasetMeta(i);
      meta.data.forEach(function (el, k) {
        var raw = d.data[k];
        var y = raw !== null && typeof raw === 'object' ? raw.y : raw;
        if (y === null || y === undefined || !isFinite(y)) return;
        if (isFinite(el.x) && isFinite(el.y)) n++;
      });
    });
    return n;
  }

  var status = {plots: 0, rendered: 0, errors: errors, empty: [], charts: {}};
  window.__memraDash = status;
  var specs = [];
  try {
    specs = JSON.parse(document.getElementById('memra-data').textContent).plots;
  } catch (e) {
    errors.push('reading the plot data: ' + e);
  }
  status.plots = specs.length;
  specs.forEach(function (spec) {
    var grid = document.getElementById('grid-' + spec.section);
    var box = document.createElement('div');
    box.className = 'plot';
    box.id = spec.id;
    box.setAttribute('data-title', spec.title);
    var h = document.createElement('h3');
    h.textContent = spec.title;
    box.appendChild(h);
    var holder = document.createElement('div');
    holder.className = 'canvas-holder';
    var canvas = document.createElement('canvas');
    holder.appendChild(canvas);
    box.appendChild(holder);
    (grid || document.body).appendChild(box);
    try {
      var chart = new Chart(canvas, configFor(spec));
      status.charts[spec.id] = chart;
      var pts = drawnPoints(chart);
      var px = painted(canvas);
      if (pts > 0 && px > 0) {
        status.rendered++;
        box.setAttribute('data-rendered', pts);
      } else {
        status.empty.push(spec.title + ' (points ' + pts + ', painted ' + px + ')');
        box.setAttribute('data-rendered', '0');
      }
    } catch (e) {
      errors.push(spec.title + ': ' + (e && e.stack ? e.stack.split('\n')[0] : e));
      box.setAttribute('data-rendered', '0');
    }
  });

  var filter = document.getElementById('filter');
  if (filter) {
    filter.addEventListener('input', function () {
      var rx = null;
      try { rx = filter.value ? new RegExp(filter.value, 'i') : null; } catch (e) { rx = null; }
      document.querySelectorAll('.plot').forEach(function (p) {
        p.style.display = !rx || rx.test(p.getAttribute('data-title')) ? '' : 'none';
      });
    });
  }

  function writeStatus() {
    var el = document.getElementById('memra-dash-status');
    el.setAttribute('data-state', 'done');
    el.setAttribute('data-plots', String(status.plots));
    el.setAttribute('data-rendered', String(status.rendered));
    el.setAttribute('data-errors', String(errors.length));
    el.textContent = 'rendered ' + status.rendered + ' of ' + status.plots + ' plots' +
        (status.empty.length ? '\nwithout data: ' + status.empty.join('; ') : '') +
        (errors.length ? '\nerrors:\n' + errors.join('\n') : '');
  }
  writeStatus();
  // an error after drawing (a resize, an event) still shows in the status
  window.addEventListener('error', function () { setTimeout(writeStatus, 0); });
})();
